"""Scheduler HA against a real store: one leader at a time, fail-stop, fenced failover.

Scheduler time is a FakeClock. Lease time is the database's: on SQLite the stores judge it
by ``lease_clock`` (a FakeClock the test moves); on PostgreSQL by the server's own clock, so
there a lease runs out in real time and the tests poll (with a deadline) for the takeover.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.fixtures.brokers import ClockedBroker
from tests.helpers import FakeClock, eventually, make_job, shell_task, utc
from tests.integration.test_scheduler import all_runs
from tickwork.broker.memory import MemoryBroker
from tickwork.core.errors import ValidationError
from tickwork.core.model import (
    RetryPolicy,
    RunTrigger,
    Schedule,
    ScheduleKind,
    TaskRunState,
)
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Broker, Fence, Fenced
from tickwork.scheduler.ha import HAConfig, HAScheduler, LeaderStatus, Role, ha_scheduler
from tickwork.scheduler.history import HistoryConfig
from tickwork.scheduler.loop import Scheduler, SchedulerConfig
from tickwork.store import SqlStore, open_store
from tickwork.store.engine import create_engines
from tickwork.store.schema import jobs

T0 = utc(2026, 3, 2, 10, 0)
EVERY_MINUTE = Schedule(kind=ScheduleKind.CRON, cron="* * * * *", timezone="UTC")


@dataclass
class Replica:
    """One scheduler process: its own store connection, broker and HA runner."""

    name: str
    store: SqlStore
    broker: Broker
    ha: HAScheduler

    async def tick(self, clock: FakeClock) -> None:
        await self.ha.scheduler.tick(clock.now)


@dataclass
class Cluster:
    clock: FakeClock  # scheduler time
    lease_clock: FakeClock  # lease time on SQLite
    mono: FakeClock  # the replicas' monotonic clock
    replicas: list[Replica]

    def pause_past_ttl(self, ttl: float) -> None:
        """Time passes for everyone but a paused leader, which neither renews nor writes."""
        for clock in (self.lease_clock, self.mono):
            clock.now += timedelta(seconds=ttl * 1.5)


MakeCluster = Callable[..., Awaitable[Cluster]]


@pytest.fixture
async def make_cluster(store_url: str, store: SqlStore) -> AsyncIterator[MakeCluster]:
    opened: list[SqlStore] = []

    async def make(
        ttl: float, *, renew_every: float | None = None, real: bool = False, window: float = 0
    ) -> Cluster:
        clock, lease_clock, mono = FakeClock(T0), FakeClock(T0), FakeClock(T0)
        config = HAConfig(ttl=ttl, renew_every=renew_every, campaign_every=0.05)
        shared = ClockedBroker(clock) if window else None  # one broker for all, like Redis
        replicas = []

        def monotonic() -> float:
            return mono.now.timestamp()

        for name in ("a", "b"):
            s = (
                await open_store(store_url)
                if real
                else await open_store(store_url, clock=lease_clock)
            )
            opened.append(s)
            broker: Broker = shared or MemoryBroker()
            ha = ha_scheduler(
                s,
                broker,
                holder=name,
                clock=clock,
                rand=random.random,
                make_id=new_id,
                ha=config,
                config=SchedulerConfig(window=window),
                monotonic=time.monotonic if real else monotonic,
            )
            replicas.append(Replica(name, s, broker, ha))
        return Cluster(clock, lease_clock, mono, replicas)

    yield make
    for s in opened:
        await s.close()


async def _delivered(cluster: Cluster) -> set[str]:
    """The task runs the replicas' brokers hold, whoever published them (once or more)."""
    batches = [await r.broker.consume(["default"], 1000, 0.05) for r in cluster.replicas]
    return {d.task_run_id for batch in batches for d in batch}


async def _task_run_ids(store: SqlStore, job_name: str) -> set[str]:
    details = [await store.get_run(r.id) for r in await all_runs(store, job_name)]
    return {tr.id for d in details if d is not None for tr in d.task_runs}


async def _take_over(replica: Replica) -> None:
    await eventually(replica.ha.election.campaign, bool, timeout=20)


async def _add_every_minute_job(store: SqlStore) -> None:
    job = make_job(
        "every-minute",
        now=T0,
        schedule=EVERY_MINUTE,
        task=shell_task("true"),
        catchup=True,
        next_fire_at=utc(2026, 3, 2, 10, 1),
    )
    await store.create_jobs([(job, [])])


async def test_one_replica_leads_and_the_other_stands_by(make_cluster: MakeCluster) -> None:
    a, b = (await make_cluster(30.0)).replicas

    assert await a.ha.election.campaign() is True
    assert await b.ha.election.campaign() is False

    status = a.ha.status
    assert (status.role, status.holder, status.epoch) == (Role.LEADER, "a", 1)
    assert b.ha.status == LeaderStatus(Role.STANDBY, "b")
    assert a.ha.election.fence() == Fence("scheduler", 1)
    with pytest.raises(Fenced):
        b.ha.election.fence()


async def test_failover_refuses_the_old_leaders_writes_and_keeps_every_fire_once(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster(2.0)
    a, b = cluster.replicas
    await _add_every_minute_job(a.store)
    clock = cluster.clock
    clock.now = utc(2026, 3, 2, 10, 1, 0, 10_000)
    assert await a.ha.election.campaign()
    await a.tick(clock)  # 10:01 materialized by a
    old = a.ha.election.fence()

    cluster.pause_past_ttl(2.0)  # a is stopped (SIGSTOP) past its lease
    clock.now = utc(2026, 3, 2, 10, 2, 0, 10_000)
    await _take_over(b)
    assert b.ha.status.epoch == old.token + 1

    # a resumes. Its own runner stops before writing: its local deadline has passed ...
    with pytest.raises(Fenced):
        await a.tick(clock)
    # ... and a write that does get out with the old token is refused by the database.
    resumed = Scheduler(
        a.store, a.broker, clock=clock, rand=random.random, make_id=new_id, fence=lambda: old
    )
    with pytest.raises(Fenced):
        await resumed.tick(clock.now)
    assert [r.logical_date.minute for r in await all_runs(b.store, "every-minute")] == [1]

    await b.tick(clock)  # 10:02 by b
    clock.now = utc(2026, 3, 2, 10, 3, 0, 10_000)
    assert await b.ha.election.renew()
    await b.tick(clock)  # 10:03 by b
    assert not await a.ha.election.renew()  # a learns it lost the lease

    runs = await all_runs(b.store, "every-minute")
    assert [(r.logical_date.minute, r.trigger) for r in runs] == [
        (1, RunTrigger.SCHEDULE),
        (2, RunTrigger.SCHEDULE),
        (3, RunTrigger.SCHEDULE),
    ]
    # Every fire reached a broker (b's reconciler also re-sent the ones nobody claimed).
    assert await _delivered(cluster) == await _task_run_ids(b.store, "every-minute")


async def test_repeated_failovers_neither_double_nor_lose_a_cron_fire(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster(2.0)
    await _add_every_minute_job(cluster.replicas[0].store)
    leader, standby = cluster.replicas
    assert await leader.ha.election.campaign()
    refused, epochs = 0, [leader.ha.status.epoch]
    for minute in range(1, 10):
        cluster.clock.now = utc(2026, 3, 2, 10, minute, 0, 10_000)
        if minute in (3, 6):  # the leader is paused past its lease; the standby takes over
            cluster.pause_past_ttl(2.0)
            await _take_over(standby)
            try:
                await leader.tick(cluster.clock)  # the old leader wakes up and tries
            except Fenced:
                refused += 1
            leader, standby = standby, leader
            epochs.append(leader.ha.status.epoch)
        assert await leader.ha.election.renew()
        await leader.tick(cluster.clock)

    runs = await all_runs(leader.store, "every-minute")
    assert [r.logical_date.minute for r in runs] == list(range(1, 10))
    assert await _delivered(cluster) == await _task_run_ids(leader.store, "every-minute")
    assert refused == 2
    assert epochs == [1, 2, 3]


async def test_failover_with_a_window_runs_each_fire_handed_out_ahead_once(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster(2.0, window=300.0)
    a, b = cluster.replicas
    await _add_every_minute_job(a.store)
    clock = cluster.clock
    ran: dict[datetime, int] = {}

    async def minute(leader: Replica, at: datetime) -> None:
        clock.now = at
        if leader.ha.status.role is Role.LEADER:
            assert await leader.ha.election.renew()
        await leader.tick(clock)
        keys = [(d.task_run_id, d.attempt) for d in await a.broker.consume(["default"], 99, 0.01)]
        for tr in await a.store.claim(keys, "w1", at):  # what a worker runs
            # This worker never completes nor heartbeats: the reaper retries its attempts
            # (lost with their worker, core.retry.INFRA_RETRIES). Count the first ones.
            if tr.attempt == 1:
                ran[tr.logical_date] = ran.get(tr.logical_date, 0) + 1

    assert await a.ha.election.campaign()
    await minute(a, utc(2026, 3, 2, 10, 0, 30))  # a hands out 10:01 .. 10:05
    await minute(a, utc(2026, 3, 2, 10, 1, 30))
    cluster.pause_past_ttl(2.0)  # a is paused
    await _take_over(b)
    for m in range(2, 11):
        await minute(b, utc(2026, 3, 2, 10, m, 30))

    assert ran == {utc(2026, 3, 2, 10, m): 1 for m in range(1, 11)}


async def test_a_standby_takes_over_within_ttl_after_the_leader_dies(
    make_cluster: MakeCluster,
) -> None:
    a, b = (await make_cluster(1.0, real=True)).replicas
    assert await a.ha.election.campaign()  # a leads ... and dies: it never renews
    died = time.monotonic()
    standby = asyncio.create_task(b.ha.run())
    try:
        await eventually(lambda: asyncio.sleep(0, b.ha.status.role), lambda r: r is Role.LEADER)
        took = time.monotonic() - died
    finally:
        standby.cancel()
        await asyncio.gather(standby, return_exceptions=True)
    assert 0.9 <= took <= 1.0 + 0.05 + 2.0  # not before expiry; within ttl + campaign + slack
    assert b.ha.status.role is Role.STANDBY  # stopped, and released the lease
    lease = await a.store.get_lease("scheduler")
    assert lease is not None and (lease.holder, lease.token) == ("b", 2)


async def test_run_loops_keep_one_leader_and_a_clean_stop_hands_over_at_once(
    make_cluster: MakeCluster,
) -> None:
    a, b = (await make_cluster(30.0, real=True)).replicas
    tasks = {r.name: asyncio.create_task(r.ha.run()) for r in (a, b)}
    try:

        async def leaders() -> list[str]:
            await asyncio.sleep(0.01)
            return [r.name for r in (a, b) if r.ha.status.role is Role.LEADER]

        first = (await eventually(leaders, lambda names: len(names) == 1))[0]
        for _ in range(10):  # standbys keep campaigning; the lease stays with one
            assert await leaders() == [first]
        tasks[first].cancel()  # a clean stop releases the lease ...
        await asyncio.gather(tasks[first], return_exceptions=True)
        second = (await eventually(leaders, lambda names: len(names) == 1))[0]
        assert second != first  # ... so the standby leads long before the 30 s ttl
        lease = await a.store.get_lease("scheduler")
        assert lease is not None and (lease.holder, lease.token) == (second, 2)
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


async def test_leader_stops_scheduling_when_its_deadline_passes_before_a_renewal(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster(30.0, renew_every=0.02)
    a = cluster.replicas[0]
    await _add_every_minute_job(a.store)
    cluster.clock.now = utc(2026, 3, 2, 10, 1, 0, 10_000)
    assert await a.ha.election.campaign()
    lead = asyncio.create_task(a.ha.lead())
    await eventually(lambda: all_runs(a.store, "every-minute"), bool)  # it is scheduling

    # Only a's own clock moves past its deadline (say its renewals hang); the lease is
    # still a's in the database, which would renew it.
    cluster.mono.now += timedelta(seconds=31)
    await asyncio.wait_for(lead, 5)

    assert a.ha.status.role is Role.STANDBY
    lease = await a.store.get_lease("scheduler")
    assert lease is not None and lease.holder == "a"  # not refused: it stopped on its own


async def test_leader_stops_scheduling_at_once_when_a_renewal_is_refused(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster(30.0, renew_every=0.02)
    a, b = cluster.replicas
    assert await a.ha.election.campaign()
    lead = asyncio.create_task(a.ha.lead())
    held = a.ha.election.fence()
    # Someone ends a's lease in the database (an operator, a clock jump) and b takes it.
    assert await b.store.release_lease("scheduler", "a", held.token)
    assert await b.ha.election.campaign()

    await asyncio.wait_for(lead, 5)

    assert a.ha.status.role is Role.STANDBY
    assert b.ha.status.epoch == held.token + 1


async def test_only_the_leader_reaps_zombies_and_a_stale_one_reaps_nothing(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster(2.0)
    a, b = cluster.replicas
    job = make_job("z", now=T0, retry=RetryPolicy(max_attempts=2, initial_delay=5, jitter=0))
    nr = new_run(
        job, T0, trigger=RunTrigger.SCHEDULE, now=T0, make_id=new_id, state=TaskRunState.QUEUED
    )
    await a.store.create_jobs([(job, [nr])])
    tr = nr.task_runs[0]
    await a.store.claim([(tr.id, 1)], "w-dead", T0)
    cluster.clock.now = T0 + timedelta(seconds=16)
    assert await a.ha.election.campaign()
    old = a.ha.election.fence()
    cluster.pause_past_ttl(2.0)
    await _take_over(b)

    stale = Scheduler(
        a.store,
        a.broker,
        clock=cluster.clock,
        rand=random.random,
        make_id=new_id,
        fence=lambda: old,
    )
    with pytest.raises(Fenced):
        await stale.reap_zombies(cluster.clock.now)
    detail = await b.store.get_run(nr.run.id)
    assert detail is not None and detail.task_runs[0].state is TaskRunState.RUNNING

    assert await b.ha.scheduler.reap_zombies(cluster.clock.now) == 1
    detail = await b.store.get_run(nr.run.id)
    assert detail is not None
    assert (detail.task_runs[0].state, detail.task_runs[0].attempt) == (
        TaskRunState.UP_FOR_RETRY,
        2,
    )


def test_ha_config_refuses_impossible_timings() -> None:
    assert HAConfig(ttl=9.0).renewal == 3.0
    for bad in ({"ttl": 0.0}, {"ttl": 5.0, "renew_every": 5.0}, {"campaign_every": 0.0}):
        with pytest.raises(ValueError):
            HAConfig(**bad)  # type: ignore[arg-type]


async def test_a_replica_hands_out_five_minutes_ahead_by_default(store: SqlStore) -> None:
    clock = FakeClock(T0)
    broker = ClockedBroker(clock)
    ha = ha_scheduler(store, broker, holder="a", clock=clock, rand=random.random, make_id=new_id)
    job = make_job("once", now=T0, schedule=Schedule(kind=ScheduleKind.AT, at=T0))
    due = [T0 + timedelta(minutes=m) for m in (4, 6)]
    await store.create_jobs(
        [(job, [new_run(job, d, trigger=RunTrigger.MANUAL, now=T0, make_id=new_id) for d in due])]
    )
    assert await ha.election.campaign()

    await ha.scheduler.tick(clock.now)

    assert [instant for _, instant in broker.handed_out] == due[:1]


async def test_a_crashing_scheduler_stops_the_replica_loudly_and_frees_the_lease(
    make_cluster: MakeCluster, store_url: str
) -> None:
    a, b = (await make_cluster(30.0, real=True)).replicas
    await _add_every_minute_job(a.store)
    engines = create_engines(store_url)
    try:
        with engines.write.begin() as conn:  # a row no scheduler can plan
            conn.execute(sa.update(jobs).values(cron="not a cron", next_fire_at=T0))
    finally:
        engines.dispose()

    with pytest.raises(ValidationError, match="cron"):
        await asyncio.wait_for(a.ha.run(), 10)

    assert a.ha.status.role is Role.STANDBY
    assert await b.ha.election.campaign()  # released: no need to wait out the 30 s ttl


async def test_the_leader_keeps_house_while_it_leads_and_stops_when_it_loses_the_lease(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster(30.0, renew_every=0.02)
    a, b = cluster.replicas
    started, stopped = asyncio.Event(), asyncio.Event()

    async def housekeeping() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    a.ha.housekeeping = housekeeping
    assert await a.ha.election.campaign()
    lead = asyncio.create_task(a.ha.lead())
    await asyncio.wait_for(started.wait(), 5)  # at the start of leadership
    assert not stopped.is_set()
    held = a.ha.election.fence()
    assert await b.store.release_lease("scheduler", "a", held.token)
    assert await b.ha.election.campaign()
    await asyncio.wait_for(lead, 5)
    assert stopped.is_set()  # it stops with the leadership


async def test_a_replica_built_with_a_history_config_maintains_partitions_when_it_leads(
    store: SqlStore,
) -> None:
    clock = FakeClock(T0)
    calls: list[tuple[datetime, int | None]] = []
    maintain = store.maintain_partitions

    async def recorded(now: datetime, **kw: Any) -> Any:
        calls.append((now, kw.get("retention_days")))
        return await maintain(now, **kw)

    store.maintain_partitions = recorded  # type: ignore[method-assign]
    replica = ha_scheduler(
        store,
        MemoryBroker(),
        holder="h",
        clock=clock,
        rand=random.random,
        make_id=new_id,
        history=HistoryConfig(retention_days=400, every=3600),
    )
    assert await replica.election.campaign()
    lead = asyncio.create_task(replica.lead())
    try:

        async def made() -> list[tuple[datetime, int | None]]:
            return calls

        await eventually(made, bool)
        assert calls == [(T0, 400)]
    finally:
        lead.cancel()
        await asyncio.gather(lead, return_exceptions=True)
