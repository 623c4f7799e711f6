"""End to end, per mode: a deliberately stuck run is explained by `tickwork run why`.

Embedded (`tickwork up`): a pool of one slot held by a long task; the second run waits for it.
Distributed (scheduler, worker and API processes on a private PostgreSQL and Redis): a run
queued on a queue that no worker serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Cli, free_port, wait_for
from tests.pg import ThrowawayPostgres, find_bin_dir
from tests.redis_server import PrivateRedis

pytestmark = pytest.mark.slow


def _job(path: Path, name: str, *, extra: str) -> Path:
    path.write_text(
        f"name: {name}\nschedule: {{kind: now}}\n{extra}"
        "tasks:\n  - {name: main, kind: shell, argv: [sleep, '300'], pool: db}\n"
    )
    return path


def test_embedded_a_run_waiting_for_a_full_pool_is_explained(cli: Cli, tmp_path: Path) -> None:
    cli("pool", "set", "db", "--slots", "1")
    cli("job", "apply", str(_job(tmp_path / "holder.yaml", "holder", extra="")))
    holder = wait_for(lambda: cli.json("run", "list", "--job", "holder")["runs"],
                      lambda runs: runs and runs[0]["state"] == "running")[0]  # fmt: skip
    cli("job", "apply", str(_job(tmp_path / "waiter.yaml", "waiter", extra="")))
    waiter = wait_for(lambda: cli.json("run", "list", "--job", "waiter")["runs"], bool)[0]

    said = cli("run", "why", waiter["id"]).stdout.strip()
    assert said == f"pool db full (1/1 slots; held by runs {holder['id']})"
    assert cli.json("job", "why", "waiter")["reasons"][0]["code"] == "pool_full"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) for a private server")
    made = Cluster(tmp_path, ThrowawayPostgres(bin_dir, free_port()), PrivateRedis())
    made.pg.start()
    made.redis.start()
    try:
        made.start(schedulers=1, workers=1)
        yield made
    finally:
        made.close()


def test_distributed_a_run_on_a_queue_no_worker_serves_is_explained(cluster: Cluster) -> None:
    job = {
        "name": "gpu-only",
        "schedule": {"kind": "now"},
        "queue": "gpu",
        "task": {"kind": "shell", "argv": ["true"]},
    }
    with cluster.client() as tw:
        tw.create_job(job)  # type: ignore[arg-type]
        run = wait_for(lambda: tw.list_runs(job="gpu-only")["runs"], bool)[0]
        said = cluster.cli("run", "why", run["id"]).stdout.strip()
        reasons = tw.why_job("gpu-only")["reasons"]
    assert said == "task main is queued on queue 'gpu' that no live worker serves"
    assert [r["code"] for r in reasons] == ["no_worker"]
