"""Jitter through the scheduler and a real store (SQLite and PostgreSQL): the fire keeps its
logical date, its run is due at the jittered instant, the same on every scheduler."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime

from tests.helpers import FakeClock, make_job, shell_task, utc
from tickwork.broker.memory import MemoryBroker
from tickwork.core.jitter import due_at
from tickwork.core.model import RunState, Schedule, ScheduleKind, TaskRun
from tickwork.ids import new_id
from tickwork.ports import Store
from tickwork.scheduler.loop import Scheduler, SchedulerConfig

FIRE = utc(2026, 3, 2, 10, 5)
NEXT = utc(2026, 3, 2, 10, 10)
EVERY_5 = Schedule(kind=ScheduleKind.CRON, cron="*/5 * * * *", timezone="Europe/Berlin")


def scheduler(store: Store, broker: MemoryBroker, clock: FakeClock, spread: float = 0) -> Scheduler:
    config = SchedulerConfig(cron_spread=spread)
    return Scheduler(store, broker, clock=clock, rand=random.random, make_id=new_id, config=config)


async def add_job(store: Store, name: str, jitter: float | None) -> None:
    job = make_job(
        name, now=utc(2026, 3, 2, 10), schedule=EVERY_5, task=shell_task("true"),
        next_fire_at=FIRE,
    )  # fmt: skip
    await store.create_jobs([(replace(job, jitter=jitter), [])])


async def task_runs(store: Store, name: str) -> list[TaskRun]:
    job = await store.get_job(name)
    assert job is not None
    found: list[TaskRun] = []
    for run in (await store.list_runs(job_id=job.id, limit=100)).runs:
        detail = await store.get_run(run.id)
        assert detail is not None
        found += detail.task_runs
    return sorted(found, key=lambda tr: tr.logical_date)


async def test_jittered_fire_keeps_its_date_and_is_queued_at_its_instant(store: Store) -> None:
    await add_job(store, "spread", 240)
    stored = await store.get_job("spread")
    assert stored is not None and stored.jitter == 240
    due = due_at("spread", FIRE, 240, NEXT)
    assert FIRE < due < NEXT
    broker, clock = MemoryBroker(), FakeClock(utc(2026, 3, 2, 10, 4, 59, 500_000))
    sched = scheduler(store, broker, clock)

    await sched.tick(clock.now)  # materialized ahead, due at its jittered instant
    [tr] = await task_runs(store, "spread")
    assert (tr.logical_date, tr.due_at) == (FIRE, due)
    clock.now = FIRE
    await sched.tick(clock.now)  # the cron instant itself: not due yet
    assert await broker.consume(["default"], 10, 0.05) == []

    clock.now = due
    await sched.tick(clock.now)
    assert len(await broker.consume(["default"], 10, 0.1)) == 1
    [tr] = await task_runs(store, "spread")
    assert tr.logical_date == FIRE and tr.state.value == "queued"


async def test_a_failover_scheduler_plans_the_same_instant_and_never_doubles(
    store: Store,
) -> None:
    await add_job(store, "spread", 240)
    clock = FakeClock(utc(2026, 3, 2, 10, 5, 1))
    await scheduler(store, MemoryBroker(), clock).tick(clock.now)
    await scheduler(store, MemoryBroker(), clock).tick(clock.now)  # the next leader

    runs = await task_runs(store, "spread")
    assert [(tr.logical_date, tr.due_at) for tr in runs] == [
        (FIRE, due_at("spread", FIRE, 240, NEXT))
    ]


async def test_fleet_spread_moves_jobs_without_a_jitter_and_zero_keeps_the_dot(
    store: Store,
) -> None:
    await add_job(store, "fleet", None)
    await add_job(store, "sharp", 0)
    clock = FakeClock(utc(2026, 3, 2, 10, 4, 59, 500_000))
    await scheduler(store, MemoryBroker(), clock, spread=120).tick(clock.now)

    [fleet] = await task_runs(store, "fleet")
    [sharp] = await task_runs(store, "sharp")
    assert fleet.due_at == due_at("fleet", FIRE, 120, NEXT) > FIRE
    assert sharp.due_at == FIRE
    assert {fleet.logical_date, sharp.logical_date} == {FIRE}


async def test_a_fire_already_past_its_jittered_instant_is_queued_at_once(store: Store) -> None:
    await add_job(store, "late", 240)
    after_due: datetime = due_at("late", FIRE, 240, NEXT) + (NEXT - FIRE) / 1000
    clock = FakeClock(min(after_due, NEXT - (NEXT - FIRE) / 1000))
    broker = MemoryBroker()
    await scheduler(store, broker, clock).tick(clock.now)
    job = await store.get_job("late")
    assert job is not None
    [run] = (await store.list_runs(job_id=job.id, limit=10)).runs
    assert run.logical_date == FIRE and run.state is RunState.QUEUED
