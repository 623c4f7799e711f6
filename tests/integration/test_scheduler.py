"""The scheduler loop against a real store, with a clock the test moves."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from datetime import timedelta

from tests.helpers import FakeClock, make_job, shell_task, utc
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import (
    RetryPolicy,
    Run,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    TaskRunState,
)
from tickwork.core.retry import INFRA_RETRIES
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Store
from tickwork.scheduler.loop import Scheduler

T0 = utc(2026, 3, 2, 10, 2)
EVERY_5 = Schedule(kind=ScheduleKind.CRON, cron="*/5 * * * *", timezone="Europe/Berlin")


def scheduler(store: Store, broker: MemoryBroker, clock: FakeClock) -> Scheduler:
    return Scheduler(store, broker, clock=clock, rand=random.random, make_id=new_id)


async def all_runs(store: Store, job_name: str) -> list[Run]:
    job = await store.get_job(job_name)
    assert job is not None
    page = await store.list_runs(job_id=job.id, limit=1000)
    return sorted(page.runs, key=lambda r: r.logical_date)


async def add_cron_job(store: Store, name: str, *, catchup: bool) -> None:
    job = make_job(
        name,
        now=T0,
        schedule=EVERY_5,
        task=shell_task("true"),
        catchup=catchup,
        next_fire_at=utc(2026, 3, 2, 10, 5),
    )
    await store.create_jobs([(job, [])])


async def test_cron_fire_materializes_once_and_is_published(sqlite_store: Store) -> None:
    await add_cron_job(sqlite_store, "every5", catchup=False)
    broker, clock = MemoryBroker(), FakeClock(utc(2026, 3, 2, 10, 5, 0, 10_000))
    sched = scheduler(sqlite_store, broker, clock)

    await sched.tick(clock.now)
    await sched.tick(clock.now)  # a second pass over the same instant adds nothing

    runs = await all_runs(sqlite_store, "every5")
    assert [r.logical_date for r in runs] == [utc(2026, 3, 2, 10, 5)]
    assert runs[0].state is RunState.QUEUED and runs[0].trigger is RunTrigger.SCHEDULE
    delivered = await broker.consume(["default"], 10, 0.1)
    assert len(delivered) == 1
    job = await sqlite_store.get_job("every5")
    assert job is not None and job.next_fire_at == utc(2026, 3, 2, 10, 10)


async def test_restart_after_an_hour_without_catchup_runs_latest_and_records_skips(
    sqlite_store: Store,
) -> None:
    await add_cron_job(sqlite_store, "every5", catchup=False)
    clock = FakeClock(utc(2026, 3, 2, 10, 5, 1))
    await scheduler(sqlite_store, MemoryBroker(), clock).tick(clock.now)
    # tickwork is stopped for an hour, then a new scheduler starts
    clock.now = utc(2026, 3, 2, 11, 7)
    restarted = scheduler(sqlite_store, MemoryBroker(), clock)
    await restarted.tick(clock.now)
    await restarted.tick(clock.now)

    runs = await all_runs(sqlite_store, "every5")
    dates = [r.logical_date for r in runs]
    assert dates == [utc(2026, 3, 2, 10, 5) + timedelta(minutes=5 * i) for i in range(13)]
    assert len(set(dates)) == len(dates)
    states = Counter(r.state for r in runs)
    assert states == {RunState.QUEUED: 2, RunState.SKIPPED: 11}
    assert runs[-1].state is RunState.QUEUED and runs[-1].trigger is RunTrigger.SCHEDULE
    assert all(r.trigger is RunTrigger.MISSED for r in runs[1:-1])


async def test_restart_after_an_hour_with_catchup_runs_every_missed_fire(
    sqlite_store: Store,
) -> None:
    await add_cron_job(sqlite_store, "every5", catchup=True)
    clock = FakeClock(utc(2026, 3, 2, 11, 7))
    broker = MemoryBroker()
    await scheduler(sqlite_store, broker, clock).tick(clock.now)

    runs = await all_runs(sqlite_store, "every5")
    assert len(runs) == 13 and all(r.state is RunState.QUEUED for r in runs)
    assert Counter(r.trigger for r in runs) == {RunTrigger.CATCHUP: 12, RunTrigger.SCHEDULE: 1}
    assert len(await broker.consume(["default"], 100, 0.1)) == 13


async def test_two_schedulers_racing_never_double_a_fire(sqlite_store: Store) -> None:
    await add_cron_job(sqlite_store, "every5", catchup=True)
    clock = FakeClock(utc(2026, 3, 2, 12, 0))
    a = scheduler(sqlite_store, MemoryBroker(), clock)
    b = scheduler(sqlite_store, MemoryBroker(), clock)

    await asyncio.gather(a.tick(clock.now), b.tick(clock.now), a.tick(clock.now))

    dates = [r.logical_date for r in await all_runs(sqlite_store, "every5")]
    assert len(dates) == 24 and len(set(dates)) == 24


async def test_paused_job_materializes_nothing_until_resumed(sqlite_store: Store) -> None:
    await add_cron_job(sqlite_store, "every5", catchup=False)
    job = await sqlite_store.get_job("every5")
    assert job is not None
    await sqlite_store.set_paused(job.id, True, T0)
    clock = FakeClock(utc(2026, 3, 2, 10, 31))
    sched = scheduler(sqlite_store, MemoryBroker(), clock)

    await sched.tick(clock.now)
    assert await all_runs(sqlite_store, "every5") == []

    await sqlite_store.set_paused(job.id, False, clock.now)
    await sched.tick(clock.now)
    runs = await all_runs(sqlite_store, "every5")
    assert Counter(r.state for r in runs) == {RunState.QUEUED: 1, RunState.SKIPPED: 5}
    assert runs[-1].logical_date == utc(2026, 3, 2, 10, 30)


async def test_at_run_is_dispatched_only_once_due(sqlite_store: Store) -> None:
    at = utc(2026, 3, 2, 10, 30)
    job = make_job("once", now=T0, schedule=Schedule(kind=ScheduleKind.AT, at=at))
    first = new_run(job, at, trigger=RunTrigger.SCHEDULE, now=T0, make_id=new_id)
    await sqlite_store.create_jobs([(job, [first])])
    broker, clock = MemoryBroker(), FakeClock(utc(2026, 3, 2, 10, 29, 59))
    sched = scheduler(sqlite_store, broker, clock)

    await sched.tick(clock.now)
    assert await broker.consume(["default"], 10, 0.05) == []

    clock.now = at
    await sched.tick(clock.now)
    delivered = await broker.consume(["default"], 10, 0.1)
    assert [d.task_run_id for d in delivered] == [first.task_runs[0].id]


async def test_reaper_retries_a_zombie_and_dead_letters_past_the_infra_budget(
    sqlite_store: Store,
) -> None:
    job = make_job("z", now=T0, retry=RetryPolicy(max_attempts=2, initial_delay=5, jitter=0))
    nr = new_run(
        job, T0, trigger=RunTrigger.SCHEDULE, now=T0, make_id=new_id, state=TaskRunState.QUEUED
    )
    await sqlite_store.create_jobs([(job, [nr])])
    tr = nr.task_runs[0]
    await sqlite_store.claim([(tr.id, 1)], "w-dead", T0)
    clock = FakeClock(T0 + timedelta(seconds=16))
    sched = scheduler(sqlite_store, MemoryBroker(), clock)

    assert await sched.reap_zombies(clock.now) == 1
    detail = await sqlite_store.get_run(nr.run.id)
    assert detail is not None
    retried = detail.task_runs[0]
    assert retried.state is TaskRunState.UP_FOR_RETRY and retried.attempt == 2
    assert retried.due_at == clock.now + timedelta(seconds=5)
    assert "no heartbeat" in (detail.attempts[0].error or "")

    # Lost attempts are retried beyond max_attempts, from a budget of INFRA_RETRIES more.
    last = 2 + INFRA_RETRIES  # max_attempts 2, then the infrastructure budget
    for attempt in range(2, last + 1):
        clock.now += timedelta(seconds=100)
        await sched.tick(clock.now)
        assert await sqlite_store.claim([(tr.id, attempt)], "w-dead-again", clock.now)
        clock.now += timedelta(seconds=20)
        assert await sched.reap_zombies(clock.now) == 1
    detail = await sqlite_store.get_run(nr.run.id)
    assert detail is not None
    assert detail.task_runs[0].attempt == last == 5
    assert detail.task_runs[0].state is TaskRunState.FAILED
    assert detail.run.state is RunState.FAILED
    dead = await sqlite_store.list_runs(state="dead")
    assert [r.id for r in dead.runs] == [nr.run.id]


async def test_cron_fire_is_materialized_ahead_and_queued_at_its_instant(
    sqlite_store: Store,
) -> None:
    await add_cron_job(sqlite_store, "every5", catchup=False)
    broker, clock = MemoryBroker(), FakeClock(utc(2026, 3, 2, 10, 4, 59, 500_000))
    sched = scheduler(sqlite_store, broker, clock)

    await sched.tick(clock.now)
    runs = await all_runs(sqlite_store, "every5")
    assert [(r.logical_date, r.state) for r in runs] == [
        (utc(2026, 3, 2, 10, 5), RunState.SCHEDULED)
    ]
    assert await broker.consume(["default"], 10, 0.05) == []

    clock.now = utc(2026, 3, 2, 10, 5)
    await sched.tick(clock.now)
    assert len(await broker.consume(["default"], 10, 0.1)) == 1
    assert [r.state for r in await all_runs(sqlite_store, "every5")] == [RunState.QUEUED]


async def test_pausing_gives_fires_created_ahead_back_to_the_schedule(sqlite_store: Store) -> None:
    await add_cron_job(sqlite_store, "every5", catchup=False)
    broker, clock = MemoryBroker(), FakeClock(utc(2026, 3, 2, 10, 4, 59, 500_000))
    sched = scheduler(sqlite_store, broker, clock)
    await sched.tick(clock.now)  # 10:05 created ahead, not yet due
    job = await sqlite_store.get_job("every5")
    assert job is not None

    await sqlite_store.set_paused(job.id, True, clock.now)
    clock.now = utc(2026, 3, 2, 10, 12)
    await sched.tick(clock.now)
    assert await all_runs(sqlite_store, "every5") == []
    paused = await sqlite_store.get_job("every5")
    assert paused is not None and paused.next_fire_at == utc(2026, 3, 2, 10, 5)

    await sqlite_store.set_paused(job.id, False, clock.now)
    await sched.tick(clock.now)
    runs = await all_runs(sqlite_store, "every5")
    assert [(r.logical_date.minute, r.state) for r in runs] == [
        (5, RunState.SKIPPED),
        (10, RunState.QUEUED),
    ]


async def test_a_paused_jobs_at_run_waits_until_resumed(sqlite_store: Store) -> None:
    at = utc(2026, 3, 2, 10, 30)
    job = make_job("once", now=T0, schedule=Schedule(kind=ScheduleKind.AT, at=at))
    first = new_run(job, at, trigger=RunTrigger.SCHEDULE, now=T0, make_id=new_id)
    await sqlite_store.create_jobs([(job, [first])])
    await sqlite_store.set_paused(job.id, True, T0)
    broker, clock = MemoryBroker(), FakeClock(utc(2026, 3, 2, 10, 31))
    sched = scheduler(sqlite_store, broker, clock)

    await sched.tick(clock.now)
    assert await broker.consume(["default"], 10, 0.05) == []
    assert await sqlite_store.next_due_at() is None  # nothing to wake up for

    await sqlite_store.set_paused(job.id, False, clock.now)
    await sched.tick(clock.now)
    assert len(await broker.consume(["default"], 10, 0.1)) == 1
