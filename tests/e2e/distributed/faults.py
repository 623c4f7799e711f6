"""Acceptance tests of distributed mode: real processes, real faults, an independent ledger.

Each test starts a private PostgreSQL and a private Redis, then through the CLI
``tickwork db upgrade``, 3 ``tickwork scheduler`` replicas, 3 ``tickwork worker`` processes
and one ``tickwork api`` (``tests/e2e/cluster.py``), with short timings (lease TTL 3 s,
zombie heartbeat timeout 5 s). It creates a workload of cron, ``at`` and ``now`` jobs whose
tasks keep their own execution ledger (``tests/fixtures/ledger_tasks.py``), injects one kind
of fault, and then checks (``tests/e2e/ledger.py``) that no due run was lost, none doubled,
and exactly one execution per (job, logical date) succeeded: the one tickwork committed. An
audit trigger of the test's own (``tests/e2e/audit.py``) records which process made each
write, which shows that no scheduler wrote after another replica had taken its lease.

Runtime: about 4 to 5 minutes in all; three tests wait for a minute boundary (cron's
granularity). Run them with ``pytest tests/e2e/distributed``; they are shared out over two
files (processes' faults, servers' faults) so that the suite's processes run them side by side.
This module holds what both use: the timings' bounds, the checks and the workload's helpers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta

from tests.e2e import audit
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import wait_for
from tests.e2e.ledger import Workload
from tickwork.sdk import Client

MakeCluster = Callable[..., Cluster]
#: "Failover within TTL + a few seconds": the lease runs out at most a TTL after the last
#: renewal, and a standby campaigns every second; 2 s more for a loaded 2-core machine.
FAILOVER_SLACK = 3.0
#: PostgreSQL ends a transaction left open this long (the docs' advice for HA): a leader
#: paused inside one would otherwise hold the lease row's lock, and delay a takeover.
IDLE_IN_TRANSACTION = "5s"
#: All components reconnect within 10 s of PostgreSQL accepting connections again (T4).
RECONNECT = 10.0
#: From a worker's death until its attempts are failed as lost: their heartbeats stop, and
#: the reaper (every 2 s) fails them once older than the heartbeat timeout (5 s); plus slack.
REAP_BOUND = 5.0 + 2 + FAILOVER_SLACK
#: A leader paused inside a fenced write holds the lease row until PostgreSQL ends its
#: transaction: a takeover may then wait that long, plus slack.
TAKEOVER_BLOCKED = 5.0 + FAILOVER_SLACK


def now() -> datetime:
    return datetime.now(UTC)


def next_minute(lead: float) -> datetime:
    """The first cron minute boundary at least ``lead`` seconds from now."""
    at = now() + timedelta(seconds=lead)
    floor = at.replace(second=0, microsecond=0)
    return floor if floor == at else floor + timedelta(minutes=1)


def wait_until(instant: datetime) -> None:
    """Wait for a computed instant (a minute boundary, a fault's planned time)."""
    time.sleep(max((instant - now()).total_seconds(), 0.0))


def finish(work: Workload, tw: Client, timeout: float = 60) -> None:
    """Wait until every expected run has finished; the message names those that have not."""
    wait_for(lambda: work.outstanding(tw), lambda left: not left, timeout=timeout, interval=0.5)


def assert_exactly_once(
    cluster: Cluster, work: Workload, tw: Client, killed_workers: Collection[int] = ()
) -> None:
    """No run lost or doubled and one committed success each (API against the ledger), and
    no write accepted from a scheduler after another replica took its lease (audit)."""
    assert work.check(tw, killed_workers) == []
    ours = [w for w in audit.writes(cluster.sql) if w.app.startswith("scheduler-")]
    assert any(w.table != "leases" for w in ours), "no scheduler write seen: a vacuous check"
    assert audit.stale_leader_writes(cluster.sql) == []


def every_second(work: Workload, prefix: str, first: datetime, count: int) -> None:
    for i in range(count):
        work.at(f"{prefix}-{i:02d}", first + timedelta(seconds=i))


def new_leader(cluster: Cluster, epoch: int, timeout: float) -> tuple[str, int, datetime]:
    """Wait for a lease with a higher epoch than ``epoch``: (holder, epoch, acquired_at)."""
    lease: tuple[str, int, datetime] | None = wait_for(
        cluster.lease, lambda found: found is not None and found[1] > epoch, timeout=timeout
    )
    assert lease is not None
    return lease


def run_inserts_by(cluster: Cluster, tw: Client, jobs: set[str]) -> set[str]:
    """Which processes created the runs of ``jobs`` (from the audit trigger)."""
    ids = {r["id"] for r in tw.list_runs(limit=1000)["runs"] if r["job_name"] in jobs}
    inserts = audit.writes(cluster.sql, table="runs")
    return {w.app for w in inserts if w.op == "INSERT" and w.row_id in ids}
