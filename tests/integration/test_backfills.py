"""Backfills driven by the scheduler loop against a real store (SQLite and PostgreSQL), with
a clock the test moves and a "worker" that finishes what was queued."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from tests.helpers import FakeClock, make_job, shell_task, utc
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.core.backfill import BackfillMode, BackfillSpec, BackfillState, Reprocess
from tickwork.core.errors import Conflict, ValidationError
from tickwork.core.model import (
    Outcome,
    Run,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    TaskRunState,
)
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Store
from tickwork.scheduler.loop import Scheduler

T0 = utc(2026, 3, 10, 12, 0)
DAILY = Schedule(kind=ScheduleKind.CRON, cron="0 2 * * *", timezone="Europe/Berlin")
MARCH_1, MARCH_5 = utc(2026, 3, 1), utc(2026, 3, 5, 23)


def day(n: int) -> datetime:
    """02:00 Berlin (01:00 UTC) on the n-th of March 2026."""
    return utc(2026, 3, n, 1)


class Rig:
    """A store, a scheduler with a fake clock, the services, and a hand-driven worker."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.clock = FakeClock(T0)
        self.broker = MemoryBroker()
        self.scheduler = self.new_scheduler()
        self.services = Services(store, self.broker, clock=self.clock, make_id=new_id)

    def new_scheduler(self) -> Scheduler:
        return Scheduler(
            self.store, self.broker, clock=self.clock, rand=random.random, make_id=new_id
        )

    async def add_job(self, name: str = "daily") -> None:
        job = make_job(name, now=T0, schedule=DAILY, task=shell_task("true"))
        await self.store.create_jobs([(job, [])])

    async def work(self, fail: Callable[[datetime], bool] = lambda _: False) -> int:
        """Claim and finish every queued task run (failing those whose date ``fail``s)."""
        delivered = await self.broker.consume(["default"], 1000, 0.01)
        keys = [(d.task_run_id, d.attempt) for d in delivered]
        claimed = await self.store.claim(keys, "w1", self.clock.now)
        outcomes = [
            Outcome(
                task_run_id=tr.id,
                attempt=tr.attempt,
                state=TaskRunState.FAILED if fail(tr.logical_date) else TaskRunState.SUCCESS,
                started_at=self.clock.now,
                finished_at=self.clock.now + timedelta(seconds=2),
            )
            for tr in claimed
        ]
        await self.store.complete(outcomes)
        return len(claimed)

    async def drive(self, rounds: int = 50, **kw: Callable[[datetime], bool]) -> None:
        for _ in range(rounds):
            self.clock.now += timedelta(seconds=1)
            await self.scheduler.tick(self.clock.now)
            await self.work(**kw)

    async def runs(self, name: str = "daily") -> list[Run]:
        job = await self.store.get_job(name)
        assert job is not None
        page = await self.store.list_runs(job_id=job.id, limit=1000)
        return sorted(page.runs, key=lambda r: r.logical_date)


def spec(**kw: object) -> BackfillSpec:
    base: dict[str, object] = {"job_name": "daily", "start": MARCH_1, "end": MARCH_5}
    return BackfillSpec(**{**base, **kw})  # type: ignore[arg-type]


async def test_parallel_backfill_makes_each_date_once_and_completes(store: Store) -> None:
    rig = Rig(store)
    await rig.add_job()
    created = await rig.services.backfills.create(spec(max_active=2))
    assert created.backfill.total == 5 and created.progress.remaining == 5

    await rig.scheduler.tick(rig.clock.now)
    first = await rig.runs()
    assert [r.logical_date for r in first] == [day(1), day(2)]  # max_active 2
    assert all(r.trigger is RunTrigger.BACKFILL for r in first)
    await rig.drive(rounds=10)

    runs = await rig.runs()
    assert [r.logical_date for r in runs] == [day(n) for n in range(1, 6)]
    assert {r.state for r in runs} == {RunState.SUCCESS}
    view = await rig.services.backfills.get(created.backfill.id)
    assert view.backfill.state is BackfillState.COMPLETED
    assert (view.progress.succeeded, view.progress.remaining, view.progress.running) == (5, 0, 0)


async def test_backfill_task_runs_run_below_live_work(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await rig.add_job()
    await rig.services.backfills.create(spec(max_active=5))
    await rig.scheduler.tick(rig.clock.now)
    live = await rig.services.trigger("daily")
    delivered = await rig.broker.consume(["default"], 100, 0.01)
    # The live run was published last, yet comes out first: a lower lane for backfills.
    assert delivered[0].task_run_id == live.task_runs[0].id
    assert {d.priority for d in delivered[1:]} == {-10}


async def test_reprocess_rules_and_existing_runs(store: Store) -> None:
    rig = Rig(store)
    await rig.add_job()
    job = await store.get_job("daily")
    assert job is not None
    done = new_run(job, day(1), trigger=RunTrigger.SCHEDULE, now=T0, make_id=new_id)
    failed = new_run(job, day(2), trigger=RunTrigger.SCHEDULE, now=T0, make_id=new_id)
    await store.create_runs([done, failed])
    await rig.drive(rounds=1, fail=lambda d: d == day(2))  # no backfill yet: nothing queued
    for nr, state in ((done, TaskRunState.SUCCESS), (failed, TaskRunState.FAILED)):
        tr = nr.task_runs[0]
        await store.mark_queued([(tr.id, 1)], T0)
        await store.claim([(tr.id, 1)], "w", T0)
        await store.complete([Outcome(tr.id, 1, state, finished_at=T0, started_at=T0)])

    plan = await rig.services.backfills.plan(spec(reprocess=Reprocess.NONE))
    assert [p.action.value for p in plan.dates] == ["skip", "skip", "create", "create", "create"]
    plan = await rig.services.backfills.plan(spec(reprocess=Reprocess.FAILED))
    assert [p.action.value for p in plan.dates][:2] == ["skip", "rerun"]
    assert await store.list_backfills() == []  # a dry run writes nothing

    view = await rig.services.backfills.create(spec(reprocess=Reprocess.FAILED))
    await rig.drive(rounds=10)
    runs = await rig.runs()
    assert len(runs) == 5 and {r.state for r in runs} == {RunState.SUCCESS}
    rerun = await rig.services.get_run(failed.run.id)
    assert rerun.run.trigger is RunTrigger.BACKFILL
    assert [a.state for a in rerun.attempts] == [TaskRunState.FAILED, TaskRunState.SUCCESS]
    after = await rig.services.backfills.get(view.backfill.id)
    assert (after.progress.succeeded, after.progress.skipped) == (4, 1)


async def test_sequential_failure_pauses_and_resume_goes_on(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await rig.add_job()
    view = await rig.services.backfills.create(spec(mode=BackfillMode.SEQUENTIAL))
    await rig.drive(rounds=10, fail=lambda d: d == day(2))
    paused = await rig.services.backfills.get(view.backfill.id)
    assert paused.backfill.state is BackfillState.PAUSED
    assert paused.backfill.reason is not None and "failed" in paused.backfill.reason
    assert [r.logical_date for r in await rig.runs()] == [day(1), day(2)]

    await rig.services.backfills.resume(view.backfill.id)
    await rig.drive(rounds=10)
    states = Counter(r.state for r in await rig.runs())
    assert states == {RunState.SUCCESS: 4, RunState.FAILED: 1}
    done = await rig.services.backfills.get(view.backfill.id)
    assert done.backfill.state is BackfillState.COMPLETED and done.progress.failed == 1


async def test_chunked_waits_for_each_chunk(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await rig.add_job()
    await rig.services.backfills.create(spec(mode=BackfillMode.CHUNKED, chunk_size=2))
    await rig.scheduler.tick(rig.clock.now)
    await rig.scheduler.tick(rig.clock.now)
    assert len(await rig.runs()) == 2  # the second chunk waits for the first
    await rig.drive(rounds=10)
    assert len(await rig.runs()) == 5


async def test_pause_resume_cancel(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await rig.add_job()
    view = await rig.services.backfills.create(spec(max_active=1))
    await rig.services.backfills.pause(view.backfill.id)
    await rig.drive(rounds=3)
    assert await rig.runs() == []  # paused before its first step
    with pytest.raises(Conflict):
        await rig.services.backfills.pause(view.backfill.id)

    await rig.services.backfills.resume(view.backfill.id)
    await rig.scheduler.tick(rig.clock.now)
    assert len(await rig.runs()) == 1
    cancelled = await rig.services.backfills.cancel(view.backfill.id)
    assert cancelled.backfill.state is BackfillState.CANCELLED
    runs = await rig.runs()
    assert [r.state for r in runs] == [RunState.CANCELLED]  # queued, not started: cancelled
    await rig.drive(rounds=3)
    assert len(await rig.runs()) == 1  # a cancelled backfill starts nothing more


async def test_cancel_lets_running_runs_finish_unless_kill(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await rig.add_job()
    view = await rig.services.backfills.create(spec(max_active=1))
    await rig.scheduler.tick(rig.clock.now)
    delivered = await rig.broker.consume(["default"], 10, 0.01)
    await rig.store.claim([(d.task_run_id, d.attempt) for d in delivered], "w", rig.clock.now)
    await rig.services.backfills.cancel(view.backfill.id)
    assert [r.state for r in await rig.runs()] == [RunState.RUNNING]

    second = await rig.services.backfills.create(spec(start=day(3), max_active=1))
    await rig.scheduler.tick(rig.clock.now)
    delivered = await rig.broker.consume(["default"], 10, 0.01)
    claimed = await rig.store.claim([(d.task_run_id, d.attempt) for d in delivered], "w", T0)
    await rig.services.backfills.cancel(second.backfill.id, kill=True)
    task_run = await rig.store.get_task_run(claimed[0].id)
    assert task_run is not None and task_run.cancel_requested


async def test_a_restart_in_the_middle_loses_and_doubles_nothing(store: Store) -> None:
    rig = Rig(store)
    await rig.add_job()
    view = await rig.services.backfills.create(spec(max_active=2))
    await rig.drive(rounds=1)
    rig.scheduler = rig.new_scheduler()  # the process restarted: nothing kept in memory
    rig.broker = MemoryBroker()  # ... and the in-process broker lost its messages
    rig.scheduler = rig.new_scheduler()
    await rig.scheduler.resend_queued(rig.clock.now)
    await rig.drive(rounds=10)
    runs = await rig.runs()
    assert [r.logical_date for r in runs] == [day(n) for n in range(1, 6)]
    done = await rig.services.backfills.get(view.backfill.id)
    assert done.backfill.state is BackfillState.COMPLETED


async def test_overlapping_backfills_and_bad_input_are_refused(sqlite_store: Store) -> None:
    rig = Rig(sqlite_store)
    await rig.add_job()
    first = await rig.services.backfills.create(spec())
    with pytest.raises(Conflict) as refused:
        await rig.services.backfills.create(spec(start=day(3), end=utc(2026, 3, 9)))
    assert first.backfill.id in refused.value.reason
    with pytest.raises(ValidationError) as bad:
        await rig.services.backfills.create(spec(start=MARCH_5, end=MARCH_1))
    assert bad.value.field == "to"
    with pytest.raises(ValidationError) as none:
        await rig.services.backfills.create(spec(start=utc(2026, 4, 1, 5), end=utc(2026, 4, 1, 6)))
    assert none.value.field == "from"
