"""End to end: DAG workflows in a real `tickwork up`, defined through the real CLI."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Cli, Server, wait_for

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
FINISHED = {"success", "failed", "cancelled"}


def finished_runs(cli: Cli, job: str, n: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = wait_for(
        lambda: cli.json("run", "list", "--job", job)["runs"],
        lambda runs: len(runs) == n and all(r["state"] in FINISHED for r in runs),
        timeout,
    )
    return runs


def test_the_etl_example_runs_from_yaml_and_the_python_form_is_the_same_job(cli: Cli) -> None:
    # The server runs in the test's directory: its workers import examples.etl from there.
    shutil.copytree(REPO / "examples", cli.cwd / "examples")
    cli("pool", "set", "db", "--slots", "1")

    assert "created" in cli("job", "apply", "examples/etl.yaml").stdout
    assert "unchanged" in cli("job", "apply", "examples/etl.yaml").stdout
    assert "unchanged" in cli("job", "apply", "examples.etl:etl").stdout
    cli("job", "trigger", "etl")

    (run,) = finished_runs(cli, "etl")
    assert run["state"] == "success", cli("run", "show", run["id"]).stdout
    detail = cli.json("run", "show", run["id"])
    by_name = {tr["task_name"]: tr for tr in detail["task_runs"]}
    assert set(by_name) == {"extract_users", "extract_orders", "join", "aggregate", "load"}
    assert all(tr["state"] == "success" for tr in by_name.values())
    assert by_name["aggregate"]["result"] is not None  # passed on to load as its input
    users, orders, join = by_name["extract_users"], by_name["extract_orders"], by_name["join"]
    assert max(users["finished_at"], orders["finished_at"]) <= join["started_at"]
    # One slot in `db`: the two extracts never ran at the same time.
    first, second = sorted([users, orders], key=lambda tr: tr["started_at"])
    assert first["finished_at"] <= second["started_at"]
    pools = cli.json("pool", "list")
    assert [(p["name"], p["slots"], p["used"]) for p in pools] == [("db", 1, 0)]


def test_pool_slots_come_back_after_kill_9_mid_task(
    server: Server, cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "first-attempt"
    script = f"if [ -e {marker} ]; then echo second; else touch {marker}; sleep 60; fi"
    (tmp_path / "pooled.yaml").write_text(
        "name: pooled\nschedule: now\nretry: {max_attempts: 2}\ntasks:\n"
        f"  - {{name: hold, kind: shell, argv: [sh, -c, '{script}'], pool: db}}\n"
    )
    cli("pool", "set", "db", "--slots", "1")
    cli("job", "apply", "pooled.yaml")
    wait_for(marker.exists, bool)
    assert cli.json("pool", "list")[0]["used"] == 1

    server.kill9()
    server.start()

    (run,) = finished_runs(cli, "pooled")
    assert run["state"] == "success"
    attempts = cli.json("run", "show", run["id"])["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert cli.json("pool", "list")[0]["used"] == 0
