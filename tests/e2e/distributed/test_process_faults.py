"""Processes' faults: the leader killed, the leader paused past its lease, workers killed
mid-task (see ``faults``)."""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest

from tests.e2e import audit
from tests.e2e.cluster import Cluster, Proc, Timings, holder_pid
from tests.e2e.conftest import wait_for
from tests.e2e.distributed.faults import (
    FAILOVER_SLACK,
    REAP_BOUND,
    TAKEOVER_BLOCKED,
    MakeCluster,
    assert_exactly_once,
    every_second,
    finish,
    new_leader,
    next_minute,
    now,
    run_inserts_by,
    wait_until,
)
from tests.e2e.ledger import Workload, parse, read_ledger
from tickwork.sdk import Client

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


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
