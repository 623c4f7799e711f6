"""A private cluster per test: PostgreSQL, Redis and tickwork's processes (``faults``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster, Timings
from tests.e2e.conftest import FAILURE_CONTEXT, free_port
from tests.e2e.distributed.faults import IDLE_IN_TRANSACTION, MakeCluster
from tests.pg import ThrowawayPostgres, find_bin_dir
from tests.redis_server import PrivateRedis


@pytest.fixture
def make_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MakeCluster]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) for a private server")
    clusters: list[Cluster] = []

    def make(timings: Timings | None = None) -> Cluster:
        settings = {"idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION}
        pg = ThrowawayPostgres(bin_dir, free_port(), settings=settings)
        cluster = Cluster(tmp_path, pg, PrivateRedis(), timings or Timings())
        clusters.append(cluster)
        request.node.stash[FAILURE_CONTEXT] = cluster.report
        pg.start()
        cluster.redis.start()
        cluster.start()
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
