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

Runtime: about 4 to 5 minutes; three tests wait for a minute boundary (cron's granularity).
Run them with ``pytest tests/e2e/test_distributed.py``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.e2e import audit
from tests.e2e.cluster import Cluster, Proc, Timings, holder_pid
from tests.e2e.conftest import FAILURE_CONTEXT, free_port, wait_for
from tests.e2e.ledger import Workload, parse, read_ledger
from tests.pg import ThrowawayPostgres, find_bin_dir
from tests.redis_server import PrivateRedis
from tickwork.sdk import ApiError, Client

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

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


# -- 1. kill -9 the leader ---------------------------------------------------------------------


def test_kill_9_of_the_leader_fails_over_within_ttl_and_loses_no_fire(
    make_cluster: MakeCluster,
) -> None:
    # Window 0: nothing is handed to Redis ahead, so whatever falls due while no replica
    # leads waits for the successor. A cron fire is planned 1 s ahead; the leader is killed
    # 2 s before a minute boundary, so its successor must plan that fire (the lease it held
    # outlives it by 2 to 3 s: the fire is due before anyone leads again).
    cluster = make_cluster(Timings(window=0.0))
    ttl = cluster.timings.lease_ttl
    boundary = next_minute(lead=8)
    kill_at = boundary - timedelta(seconds=2)
    work = Workload(cluster.ledger)
    for i in range(6):
        work.cron_once(f"cron-{i}", boundary)
    every_second(work, "at", kill_at - timedelta(seconds=2), 12)
    with cluster.client() as tw:
        work.create(tw)
        leader, epoch = cluster.leader()
        wait_until(kill_at)
        lease = cluster.lease()
        assert lease is not None and holder_pid(lease[0]) == leader.pid, lease
        killed_at = now()
        leader.kill9()
        for i in range(3):  # queued by the API while no scheduler leads
            work.now(f"gap-{i}")
        work.create(tw)

        _, new_epoch, acquired_at = new_leader(cluster, epoch, ttl + 10)
        failover = (acquired_at - killed_at).total_seconds()
        print(f"failover after kill -9: {failover:.2f} s (TTL {ttl} s)")
        assert failover <= ttl + FAILOVER_SLACK, f"failover took {failover:.2f} s"
        successor, status_epoch = cluster.leader()
        assert successor is not leader and status_epoch == new_epoch > epoch

        finish(work, tw)
        assert_exactly_once(cluster, work, tw)
        assert run_inserts_by(cluster, tw, {f"cron-{i}" for i in range(6)}) == {successor.name}


# -- 2. SIGSTOP the leader past its lease, then SIGCONT ----------------------------------------


def test_a_leader_paused_past_its_lease_is_fenced_after_it_resumes(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    ttl = cluster.timings.lease_ttl
    work = Workload(cluster.ledger)
    every_second(work, "before", now() + timedelta(seconds=4), 4)
    with cluster.client() as tw:
        work.create(tw)
        leader, epoch = cluster.leader()
        # It leads: it has handed work over (writes of its own, seen by the audit trigger).
        wait_for(lambda: _task_run_writes(cluster, leader), bool, timeout=15, interval=0.2)
        finish(work, tw)

        stopped_at = now()
        leader.send(signal.SIGSTOP)
        every_second(work, "paused", now() + timedelta(seconds=2), 8)
        work.create(tw)
        _, _, takeover = new_leader(cluster, epoch, ttl + TAKEOVER_BLOCKED)
        print(f"takeover from a paused leader: {(takeover - stopped_at).total_seconds():.2f} s")
        wait_until(max(stopped_at + timedelta(seconds=2.5 * ttl), now()))  # well past its lease
        leader.send(signal.SIGCONT)
        # Due at once: a resumed leader that still believed it led would race for them.
        every_second(work, "resumed", now() + timedelta(seconds=1), 8)
        work.create(tw)

        wait_for(leader.log_text, lambda log: f"no longer leader (epoch {epoch})" in log)
        finish(work, tw)
        assert_exactly_once(cluster, work, tw)
        stale = [w for w in audit.writes(cluster.sql, app=leader.name) if w.at >= takeover]
        assert stale == [], "the paused leader wrote after another replica took its lease"
        assert leader.alive(), "a fenced replica campaigns again; it does not exit"


def _task_run_writes(cluster: Cluster, proc: Proc) -> list[audit.Write]:
    return [w for w in audit.writes(cluster.sql, app=proc.name) if w.table == "task_runs"]


# -- 3. kill -9 a worker mid-task --------------------------------------------------------------


def test_workers_killed_mid_task_are_reaped_and_their_tasks_retried_once(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    work = Workload(cluster.ledger)
    for i in range(4):
        work.now(f"shell-{i}", sleep=4)
    for i in range(2):
        work.now(f"python-{i}", sleep=4, python=True)
    with cluster.client() as tw:
        work.create(tw)
        # A python task runs in a task process of its worker, a shell task under a supervisor
        # of its own: both die with the worker. Kill a worker running each kind.
        python, shell = wait_for(lambda: (_running(cluster, "python"), _running(cluster, "shell")),
                                 all, timeout=20, interval=0.1)  # fmt: skip
        victims = [cluster.by_pid(pid) for pid in {python[0], shell[0]}]
        killed = {v.pid for v in victims}
        killed_at = time.time()
        for victim in victims:
            victim.kill9()
            victim.start()  # as a supervisor would: a new worker process
        lost = {ln.job for ln in read_ledger(cluster.ledger) if ln.worker_pid in killed}

        finish(work, tw)
        assert_exactly_once(cluster, work, tw, killed)
        assert {job.split("-")[0] for job in lost} == {"python", "shell"}, lost
        orphans = [ln for ln in read_ledger(cluster.ledger) if ln.orphan]
        assert orphans == [], "a task ran on after its worker's kill -9"
        reaped = max(_reaped_then_retried(tw, job, killed) for job in lost) - killed_at
        print(f"killed workers' {sorted(lost)}: attempts failed as lost after {reaped:.1f} s")
        assert reaped <= REAP_BOUND, f"the zombie sweep took {reaped:.1f} s"


def _running(cluster: Cluster, runner: str) -> list[int]:
    """Pids of the workers running a ledger task of ``runner`` now (started, not done)."""
    lines = read_ledger(cluster.ledger)
    done = {ln.token for ln in lines if ln.event == "done"}
    return [ln.worker_pid for ln in lines
            if ln.event == "start" and ln.runner == runner and ln.token not in done]  # fmt: skip


def _reaped_then_retried(tw: Client, job: str, killed: set[int]) -> float:
    """Check that a killed worker's attempt was failed as lost and a later one succeeded;
    return when the first was failed (epoch seconds)."""
    (run,) = tw.list_runs(job=job)["runs"]
    attempts = tw.get_run(run["id"])["attempts"]
    zombie, last = attempts[0], attempts[-1]
    assert len(attempts) >= 2 and last["state"] == "success", attempts
    assert zombie["state"] != "success" and "worker lost" in (zombie["error"] or ""), zombie
    worker = zombie["worker_id"]
    assert worker is not None and holder_pid(worker) in killed, zombie
    return parse(zombie["finished_at"]).timestamp()


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
