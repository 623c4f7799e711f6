"""deploy/: the Kubernetes manifests validate against the Kubernetes API schemas, every probe
points at an endpoint tickwork serves, and every metric the alert rules, the Grafana
dashboard and the autoscalers use is one tickwork exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tickwork.observe import metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S_VERSION = "1.37.0"
METRIC = re.compile(r"\b(tickwork_[a-z_]+|process_[a-z_]+)\b")


def exported() -> set[str]:
    """Every sample name tickwork can export (histograms: _bucket, _sum, _count)."""
    names = set(metrics.FACT_NAMES)
    for family in metrics.REGISTRY.collect():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}{s}" for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifests() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{p.name}:{d['kind']}", d) for p in sorted((DEPLOY / "k8s").glob("*.yaml"))
        for d in documents(p)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("where", "doc"), manifests(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_manifest_validates_against_the_kubernetes_schema(where: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_broken_manifest_is_refused() -> None:
    (doc,) = [d for w, d in manifests() if w == "worker.yaml:Deployment"]
    broken = json.loads(json.dumps(doc))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_every_deployment_probes_livez_and_readyz_and_has_a_disruption_budget() -> None:
    docs = dict(manifests())
    deployments = {w: d for w, d in docs.items() if w.endswith(":Deployment")}
    assert {w.split(".")[0] for w in deployments} == {"api", "scheduler", "worker"}
    for where, doc in deployments.items():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        assert container["livenessProbe"]["httpGet"]["path"] == "/livez", where
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", where
    budgets = [d for w, d in docs.items() if w.endswith(":PodDisruptionBudget")]
    assert {b["metadata"]["name"] for b in budgets} >= {"tickwork-scheduler", "tickwork-worker"}
    (hpa,) = [d for w, d in docs.items() if w.endswith(":HorizontalPodAutoscaler")]
    (target,) = hpa["spec"]["metrics"]
    assert target["external"]["metric"]["name"] in exported()


def rule_expressions() -> list[str]:
    (rules,) = documents(DEPLOY / "prometheus" / "tickwork-rules.yaml")
    return [r["expr"] for group in rules["groups"] for r in group["rules"]]


def dashboard_expressions() -> list[str]:
    board = json.loads((DEPLOY / "grafana" / "tickwork.json").read_text())
    return [t["expr"] for panel in board["panels"] for t in panel["targets"]]


def keda_expressions() -> list[str]:
    (scaled,) = documents(DEPLOY / "k8s" / "keda-scaledobject.yaml.example")
    assert scaled["kind"] == "ScaledObject"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "tickwork-worker"
    return [t["metadata"]["query"] for t in scaled["spec"]["triggers"]]


@pytest.mark.parametrize("source", [rule_expressions, dashboard_expressions, keda_expressions])
def test_every_metric_used_exists(source: Any) -> None:
    used = {m for expr in source() for m in METRIC.findall(expr)}
    assert used, "no metric found: the pattern is wrong"
    missing = sorted(used - exported())
    assert missing == [], f"{source.__name__} uses metrics tickwork does not export: {missing}"


def test_the_alerts_the_issue_asks_for_are_there() -> None:
    (rules,) = documents(DEPLOY / "prometheus" / "tickwork-rules.yaml")
    alerts = {r["alert"]: r for group in rules["groups"] for r in group["rules"]}
    assert {
        "TickworkQueueWithoutWorkers", "TickworkNoLeader", "TickworkMissedFires",
        "TickworkDeadLettersRising", "TickworkLatenessHigh",
    } <= set(alerts)  # fmt: skip
    assert alerts["TickworkNoLeader"]["for"] == "30s"


def test_compose_and_systemd_use_the_probes() -> None:
    compose = documents(DEPLOY / "compose.yaml")[0]
    for name in ("scheduler", "worker", "api"):
        check = " ".join(compose["services"][name]["healthcheck"]["test"])
        assert "/readyz" in check, name
    for unit in ("tickwork-scheduler.service", "tickwork-worker@.service"):
        text = (DEPLOY / "systemd" / unit).read_text()
        assert "TICKWORK_METRICS_PORT" in text and "/readyz" in text, unit
