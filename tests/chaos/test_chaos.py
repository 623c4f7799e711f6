"""The chaos suite: thousands of runs through a distributed cluster under a nemesis.

Three schedulers, three workers and an API (``tests/e2e/cluster.py``) on a private PostgreSQL
and Redis; a nemesis (``nemesis.py``) kills and freezes workers and the leader, flushes and
restarts Redis and restarts PostgreSQL, one fault every few seconds, while enqueued runs and
``at`` jobs execute a python task that keeps its own ledger. The checker (``checker.py``) then
holds tickwork's account against the ledger: 0 lost runs, 0 doubled successes, every
duplicate execution attributable to a killed or frozen worker, 0 writes from a stale epoch,
failover within TTL + 5 s.

``test_chaos_quick`` (1,500 runs, every fault once, about 2 minutes) is part of ``make test``;
``test_chaos_soak`` (``CHAOS_RUNS``, default 50,000) runs with ``make chaos`` and writes its
report to ``CHAOS_REPORT`` (default ``chaos-report.json``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.chaos.checker import Report, check, task_runs
from tests.chaos.nemesis import FAULTS, Nemesis
from tests.e2e.cluster import REPO, Cluster, Timings
from tests.e2e.conftest import FAILURE_CONTEXT, free_port
from tests.pg import ThrowawayPostgres, find_bin_dir
from tests.redis_server import PrivateRedis
from tickwork.sdk import ApiError, Client, Unreachable

JOB = "chaos"
BATCH = 1000
RETRY = {"max_attempts": 20, "initial_delay": 0.5, "multiplier": 1.0, "jitter": 0.0}
TIMINGS = Timings(lease_ttl=3.0, heartbeat_timeout=5.0, window=2.0, concurrency=8, grace=2.0)


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Cluster:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) for a private server")
    settings = {"idle_in_transaction_session_timeout": "5s"}
    pg = ThrowawayPostgres(bin_dir, free_port(), settings=settings)
    made = Cluster(tmp_path, pg, PrivateRedis(), TIMINGS)
    request.node.stash[FAILURE_CONTEXT] = made.report
    request.addfinalizer(made.close)
    pg.start()
    made.redis.start()
    made.start()
    return made


def retrying(call: object, *args: object, **kwargs: object) -> object:
    """Call the API through faults (PostgreSQL restarting): retried with its idempotency key."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return call(*args, **kwargs)  # type: ignore[operator]
        except (ApiError, Unreachable):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def create_jobs(tw: Client, ledger: Path, at_jobs: int) -> list[str]:
    task = {
        "kind": "python",
        "target": "tests.fixtures.ledger_tasks:record_run",
        "kwargs": {"ledger": str(ledger), "sleep": 0.0},
    }
    start = datetime.now(UTC) + timedelta(seconds=10)
    jobs = [{"name": JOB, "schedule": {"kind": "at", "at": "2100-01-01T00:00:00Z"},
             "task": task, "retry": RETRY}]  # fmt: skip
    names = [f"at-{i}" for i in range(at_jobs)]
    for i, name in enumerate(names):
        at = (start + timedelta(seconds=i * 0.5)).isoformat()
        jobs.append({"name": name, "schedule": {"kind": "at", "at": at}, "task": task,
                     "retry": RETRY})  # fmt: skip
    retrying(tw.create_jobs, jobs, idempotency_key="chaos-jobs")
    return names


def enqueue(tw: Client, runs: int) -> list[str]:
    ids: list[str] = []
    for n, start in enumerate(range(0, runs, BATCH)):
        count = min(BATCH, runs - start)
        batch = retrying(tw.enqueue_many, JOB, [None] * count, idempotency_key=f"chaos-{n}")
        ids += batch["run_ids"]  # type: ignore[index]
    return ids


def run_chaos(cluster: Cluster, runs: int, at_jobs: int, timeout: float) -> Report:
    started = time.monotonic()
    nemesis = Nemesis(cluster)
    with cluster.client() as tw:
        names = create_jobs(tw, cluster.ledger, at_jobs)
        nemesis.start()
        submitted = enqueue(tw, runs)
    deadline = time.monotonic() + timeout
    try:
        while True:
            done = sum(s == "success" for s, _, _ in _account(cluster).values())
            faults = {entry["fault"] for entry in nemesis.log}
            if done >= runs and faults >= set(FAULTS):
                break
            assert time.monotonic() < deadline, f"{done}/{runs} done, faults {sorted(faults)}"
            time.sleep(1)
    finally:
        nemesis.stop()
    _settle(cluster, names)
    report = check(
        cluster,
        cluster.ledger,
        JOB,
        submitted=submitted,
        at_jobs=names,
        suspects=nemesis.suspects,
    )
    report.failovers_s = [round(s, 2) for s in nemesis.failovers]
    report.slow_failovers = [s for s in nemesis.failovers if s > TIMINGS.lease_ttl + 5]
    report.faults = nemesis.log
    report.seconds = round(time.monotonic() - started, 1)
    assert nemesis.errors == [], nemesis.errors
    return report


def _account(cluster: Cluster) -> dict[str, tuple[str, int, str | None]]:
    try:
        return task_runs(cluster, JOB)
    except Exception:  # PostgreSQL restarting
        return {}


def _settle(cluster: Cluster, at_jobs: list[str]) -> None:
    """Wait (after the last fault) until the ``at`` jobs are done too."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        rows = cluster.sql(
            "SELECT count(*) FROM task_runs WHERE job_name = ANY(%s) AND state = 'success'",
            at_jobs,
        )
        if rows[0][0] >= len(at_jobs):
            return
        time.sleep(1)


@pytest.mark.slow
@pytest.mark.postgres
def test_chaos_quick(cluster: Cluster) -> None:
    report = run_chaos(cluster, runs=1500, at_jobs=20, timeout=240)
    print(json.dumps({k: v for k, v in report.to_json().items() if k != "faults"}, indent=1))
    assert report.problems == []
    assert report.succeeded == report.runs


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.chaos
def test_chaos_soak(cluster: Cluster) -> None:
    runs = int(os.environ.get("CHAOS_RUNS", "50000"))
    report = run_chaos(cluster, runs=runs, at_jobs=100, timeout=max(600, runs / 20))
    path = Path(os.environ.get("CHAOS_REPORT", REPO / "chaos-report.json"))
    path.write_text(json.dumps(report.to_json(), indent=1, default=str) + "\n")
    print(f"chaos report: {path}", file=sys.stderr)
    assert report.problems == []
    assert report.succeeded == report.runs
