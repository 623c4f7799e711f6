"""Metrics, probes, status and logs of real processes: `tickwork up`, and distributed
schedulers and a worker with ``--metrics-port`` (kill the leader: ``tickwork_leader`` and the
elections move to the standby)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.e2e.conftest import BIN, free_port, wait_for
from tickwork.serve.observed import UNSERVED_EVERY, UNSERVED_FIRST

pytestmark = pytest.mark.slow


def metric(text: str, name: str, **labels: str) -> float | None:
    """A sample from Prometheus text (None: absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head == (f"{name}{{{want}}}" if labels else name):
            return float(value)
    return None


def scrape(port: int) -> str:
    try:
        return httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx2.HTTPError:
        return ""


def _get(port: int, path: str) -> httpx2.Response | None:
    """A local server's answer, or None while nothing listens on its port yet."""
    try:
        return httpx2.get(f"http://127.0.0.1:{port}{path}", timeout=2)
    except httpx2.ConnectError:
        return None


class Procs:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.root / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(BIN / "tickwork"), *args], stdout=out, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.root,
            )  # fmt: skip
        self.procs.append((proc, log))
        return proc

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(BIN / "tickwork"), *args], capture_output=True, text=True, check=False,
            env=self.env | {"COLUMNS": "200"}, cwd=self.root, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, f"{args}: {done.stderr}"
        return done

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    made = Procs(tmp_path, env | {"TICKWORK_DATA_DIR": str(tmp_path / "data")})
    yield made
    made.stop()


def test_up_serves_metrics_probes_json_logs_and_warns_of_an_unserved_queue(procs: Procs) -> None:
    port = free_port()
    procs.env["TICKWORK_URL"] = f"http://127.0.0.1:{port}"
    up = procs.spawn("up", "up", "--port", str(port), "--queues", "default", "--log-format", "json")
    base = f"http://127.0.0.1:{port}"

    def answers() -> int:
        assert up.poll() is None, (procs.root / "up.log").read_text()
        try:
            return httpx2.get(f"{base}/readyz", timeout=1).status_code
        except httpx2.HTTPError:
            return 0

    wait_for(answers, lambda code: code == 200, timeout=30)
    assert httpx2.get(f"{base}/livez").json()["kind"] == "embedded"
    added = procs.cli("job", "add", "gq", "--now", "--queue", "gpu", "--", "true")
    assert "no live worker takes queue 'gpu'" in added.stderr
    procs.cli("job", "add", "ok", "--now", "--", "true")

    def moved() -> str:
        return httpx2.get(f"{base}/metrics").text

    text = wait_for(
        moved,
        lambda t: (
            (metric(t, "tickwork_task_runs_total", queue="default", outcome="success") or 0) >= 1
        ),
    )
    assert metric(text, "tickwork_leader") == 1
    gpu = {"lane": "0", "queue": "gpu", "state": "queued"}
    text = wait_for(moved, lambda t: metric(t, "tickwork_queue_depth", **gpu) == 1, timeout=15)
    assert metric(text, "tickwork_workers", queue="default", state="live") == 1
    status = json.loads(procs.cli("status", "-o", "json").stdout)
    assert [w["queue"] for w in status["warnings"] if w["code"] == "unserved_queue"] == ["gpu"]
    log = procs.root / "up.log"
    # The leader looks 5 s after start, then every 30 s (serve/observed.py): the job may
    # have come just after the first look.
    line = wait_for(
        lambda: [x for x in log.read_text().splitlines() if "no live worker takes it" in x],
        bool,
        timeout=UNSERVED_FIRST + UNSERVED_EVERY + 15,
    )[0]
    parsed = json.loads(line)
    assert (parsed["level"], parsed["logger"]) == ("warning", "tickwork")


@pytest.mark.postgres
def test_killing_the_leader_moves_leadership_in_metrics_and_probes(
    procs: Procs, pg_url: str, redis_url: str, redis_prefix: str
) -> None:
    procs.env |= {
        "TICKWORK_DATABASE_URL": pg_url,
        "TICKWORK_REDIS_URL": redis_url,
        "TICKWORK_REDIS_PREFIX": redis_prefix,
        "TICKWORK_LEASE_TTL": "2",
    }
    ports = [free_port(), free_port()]
    schedulers = [
        procs.spawn(f"scheduler-{i}", "scheduler", "--metrics-port", str(p))
        for i, p in enumerate(ports)
    ]
    worker_port = free_port()
    procs.spawn("worker", "worker", "--metrics-port", str(worker_port), "--concurrency", "2")

    def leaders() -> list[float | None]:
        return [metric(scrape(p), "tickwork_leader") for p in ports]

    found = wait_for(leaders, lambda ls: sorted(ls, key=str) == [0.0, 1.0], timeout=60)
    lead = found.index(1.0)
    standby = 1 - lead
    ready = httpx2.get(f"http://127.0.0.1:{ports[standby]}/readyz").json()
    assert (ready["status"], ready["role"]) == ("ready", "standby")
    assert metric(scrape(ports[standby]), "tickwork_leader_elections_total") == 0
    leader_text = scrape(ports[lead])
    assert (metric(leader_text, "tickwork_leader_epoch") or 0) >= 1
    assert "tickwork_queue_depth" in leader_text or "tickwork_workers" in leader_text
    assert "tickwork_workers" not in scrape(ports[standby])  # facts: from the leader only
    # The worker started beside the schedulers, but may not serve yet on a loaded machine.
    worker = wait_for(lambda: _get(worker_port, "/readyz"), lambda r: r is not None, timeout=30)
    assert worker.status_code == 200 and worker.json()["kind"] == "worker"
    assert metric(scrape(worker_port), "tickwork_worker_process_slots", state="free") == 2

    schedulers[lead].kill()  # kill -9: no resignation, the lease must run out
    schedulers[lead].wait(10)
    text = wait_for(
        lambda: scrape(ports[standby]),
        lambda t: metric(t, "tickwork_leader") == 1,
        timeout=20,
    )
    assert metric(text, "tickwork_leader_elections_total") == 1
    assert (metric(text, "tickwork_lease_seconds_left") or 0) > 0
    assert httpx2.get(f"http://127.0.0.1:{ports[standby]}/readyz").json()["role"] == "leader"
