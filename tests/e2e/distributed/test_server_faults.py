"""Servers' faults: Redis flushed, PostgreSQL restarted (see ``faults``)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest

from tests.e2e.cluster import Cluster, Timings
from tests.e2e.conftest import wait_for
from tests.e2e.distributed.faults import (
    FAILOVER_SLACK,
    RECONNECT,
    MakeCluster,
    assert_exactly_once,
    every_second,
    finish,
    new_leader,
    next_minute,
    wait_until,
)
from tests.e2e.ledger import Workload, read_ledger
from tickwork.sdk import ApiError

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


# -- 4. FLUSHALL Redis -------------------------------------------------------------------------


def test_flushall_loses_nothing_queued_or_handed_out_ahead(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(Timings(window=60.0))  # work is handed to Redis a minute ahead
    boundary = next_minute(lead=12)
    flush_at = boundary - timedelta(seconds=8)
    work = Workload(cluster.ledger)
    for i in range(4):
        work.cron_once(f"cron-{i}", boundary)
    every_second(work, "at", flush_at + timedelta(seconds=2), 6)
    with cluster.client() as tw:
        work.create(tw)
        wait_until(flush_at - timedelta(seconds=2))
        for i in range(12):  # more than the 6 slots: a backlog waits in the streams
            work.now(f"backlog-{i}", sleep=1.5)
        work.create(tw)
        before = wait_for(cluster.redis_counts, lambda n: n["delayed"] >= 10 and n["ready"] > 0)
        wait_until(flush_at)
        cluster.redis.flushall()
        after = cluster.redis_counts()  # (workers recreate empty streams at once)
        assert (after["delayed"], after["ready"]) == (0, 0), after
        print(f"flushed {before}")

        finish(work, tw, timeout=90)
        assert_exactly_once(cluster, work, tw)
        late = _lateness(cluster, work)
        print(f"latest start after its instant: {late:.1f} s")
        assert late <= 2 + 2 * FAILOVER_SLACK  # the epoch marker is checked every 0.5 s


def _lateness(cluster: Cluster, work: Workload) -> float:
    """The longest delay from a scheduled instant to its first execution (ledger)."""
    first: dict[tuple[str, datetime], float] = {}
    for ln in read_ledger(cluster.ledger):
        if ln.event == "start" and ln.logical_date and work.expected[ln.job] is not None:
            key = (ln.job, ln.logical_date)
            first[key] = min(first.get(key, ln.at), ln.at)
    return max(at - date.timestamp() for (_, date), at in first.items())


# -- 5. restart PostgreSQL ---------------------------------------------------------------------


def test_a_postgres_restart_is_survived_and_everything_due_runs_once(
    make_cluster: MakeCluster,
) -> None:
    # Down from 3 s before a minute boundary to 3 s after it: longer than the lease TTL, with
    # tasks running through the outage, a cron fire and `at` instants due during it.
    cluster = make_cluster()
    boundary = next_minute(lead=10)
    down_at, up_at = boundary - timedelta(seconds=3), boundary + timedelta(seconds=3)
    work = Workload(cluster.ledger)
    for i in range(4):
        work.cron_once(f"cron-{i}", boundary)
    every_second(work, "at", down_at - timedelta(seconds=2), 12)
    with cluster.client() as tw:
        work.create(tw)
        _, epoch = cluster.leader()
        wait_until(down_at - timedelta(seconds=2))
        for i in range(4):  # started before the outage, finished during it
            work.now(f"long-{i}", sleep=3)
        work.create(tw)
        wait_until(down_at)
        cluster.pg.stop_server()
        with pytest.raises(ApiError) as refused:  # a retryable 503, not a 500
            tw.list_runs()
        wait_until(up_at)
        cluster.pg.start_server()
        restarted = time.monotonic()

        new_leader(cluster, epoch, RECONNECT)
        print(f"a leader again {time.monotonic() - restarted:.1f} s after the restart")
        finish(work, tw)
        assert_exactly_once(cluster, work, tw)
        assert [p.name for p in cluster.procs if not p.alive()] == []
        assert (refused.value.status, refused.value.code) == (503, "unavailable")
