"""A backfill across a scheduler failover: the new leader goes on from the database, the old
one's late step is refused, and every date runs exactly once."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

import pytest

from tests.helpers import make_job, shell_task, utc
from tests.integration.test_ha import Cluster, MakeCluster, Replica, _take_over, make_cluster
from tickwork.app.services import Services
from tickwork.core.backfill import BackfillSpec, BackfillState
from tickwork.core.model import Outcome, RunTrigger, Schedule, ScheduleKind, TaskRunState
from tickwork.ids import new_id
from tickwork.ports import Fenced
from tickwork.scheduler.loop import Scheduler

__all__ = ["make_cluster"]  # the fixture, used by name

TTL = 5.0
HOURLY = Schedule(kind=ScheduleKind.CRON, cron="0 * * * *", timezone="Europe/Berlin")


async def _work(cluster: Cluster) -> int:
    """Claim and succeed everything either replica's broker holds."""
    done = 0
    for replica in cluster.replicas:
        delivered = await replica.broker.consume(["default"], 1000, 0.01)
        keys = [(d.task_run_id, d.attempt) for d in delivered]
        claimed = await replica.store.claim(keys, "w", cluster.clock.now)
        ok = [
            Outcome(tr.id, tr.attempt, TaskRunState.SUCCESS, finished_at=cluster.clock.now)
            for tr in claimed
        ]
        await replica.store.complete(ok)
        done += len(claimed)
    return done


async def _step(cluster: Cluster, leader: Replica, rounds: int) -> None:
    for _ in range(rounds):
        cluster.clock.now += timedelta(seconds=1)
        assert await leader.ha.election.renew()
        await leader.tick(cluster.clock)
        await _work(cluster)


async def test_a_backfill_survives_failover_without_doubling_or_losing_a_date(
    make_cluster: MakeCluster,
) -> None:
    # On PostgreSQL the lease runs on the server's real clock: each step below (a tick and
    # its work) must take less than the TTL, which 2 s did not always give a loaded machine.
    cluster = await make_cluster(TTL)
    a, b = cluster.replicas
    job = make_job("hourly", now=cluster.clock.now, schedule=HOURLY, task=shell_task("true"))
    await a.store.create_jobs([(job, [])])
    services = Services(a.store, a.broker, clock=cluster.clock, make_id=new_id)
    start, end = utc(2026, 2, 1), utc(2026, 2, 1, 23, 59)
    view = await services.backfills.create(BackfillSpec("hourly", start, end, max_active=3))
    assert view.backfill.total == 24

    assert await a.ha.election.campaign()
    await _step(cluster, a, rounds=3)
    old = a.ha.election.fence()
    cluster.pause_past_ttl(TTL)  # a stops (SIGSTOP) past its lease; b takes over
    await _take_over(b)
    await _work(cluster)  # a's last runs finish: a step would have something to write

    stale = Scheduler(
        a.store, a.broker, clock=cluster.clock, rand=random.random, make_id=new_id,
        fence=lambda: old,
    )  # fmt: skip
    with pytest.raises(Fenced):
        await stale.tick(cluster.clock.now)

    await _step(cluster, b, rounds=15)
    runs = (await b.store.list_runs(job_id=job.id, limit=100)).runs
    dates = Counter(r.logical_date for r in runs)
    assert len(dates) == 24 and set(dates.values()) == {1}
    assert {r.trigger for r in runs} == {RunTrigger.BACKFILL}
    done = await services.backfills.get(view.backfill.id)
    assert done.backfill.state is BackfillState.COMPLETED
    assert (done.progress.succeeded, done.progress.remaining) == (24, 0)
