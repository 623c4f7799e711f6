"""The sliding window: work due within it is queued and handed to the broker ahead of time.

A FakeClock drives the scheduler, the services (pause, cancel, update, delete, as the API
calls them) and the broker's delayed delivery. A "worker" here is a claim in the store: the
only way anything runs.
"""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta

import pytest

from tests.fixtures.brokers import ClockedBroker
from tests.helpers import FakeClock, eventually, shell_task, utc
from tickwork.app.records import JobSpec
from tickwork.app.services import Services
from tickwork.core.model import (
    Outcome,
    RunState,
    Schedule,
    ScheduleKind,
    TaskRun,
    TaskRunState,
)
from tickwork.ids import new_id
from tickwork.ports import Delivery, Store
from tickwork.scheduler.loop import Scheduler, SchedulerConfig

T0 = utc(2026, 3, 2, 10, 0)
WINDOW = 300.0
S = TaskRunState


class Cluster:
    """A scheduler with a window, the services and a broker, all on one FakeClock."""

    def __init__(self, store: Store, *, window: float = WINDOW) -> None:
        self.store = store
        self.clock = FakeClock(T0)
        self.broker = ClockedBroker(self.clock)
        self.services = Services(store, self.broker, clock=self.clock)
        self.scheduler = self.new_scheduler(window)

    def new_scheduler(self, window: float = WINDOW) -> Scheduler:
        config = SchedulerConfig(window=window)
        return Scheduler(
            self.store,
            self.broker,
            clock=self.clock,
            rand=random.random,
            make_id=new_id,
            config=config,
        )

    async def at_job(self, name: str, seconds: float) -> TaskRun:
        schedule = Schedule(kind=ScheduleKind.AT, at=T0 + timedelta(seconds=seconds))
        await self.services.create_job(JobSpec(name, schedule, (shell_task("true"),)))
        (tr,) = await self.task_runs(name)
        return tr

    async def cron_job(self, name: str, cron: str = "* * * * *") -> None:
        schedule = Schedule(kind=ScheduleKind.CRON, cron=cron, timezone="UTC")
        await self.services.create_job(JobSpec(name, schedule, (shell_task("true"),)))

    async def task_runs(self, name: str) -> list[TaskRun]:
        """The job's task runs, oldest logical date first."""
        runs = (await self.services.list_runs(job=name, limit=1000)).runs
        details = [await self.store.get_run(r.id) for r in sorted(runs, key=lambda r: r.id)]
        found = [tr for d in details if d is not None for tr in d.task_runs]
        return sorted(found, key=lambda tr: tr.logical_date)

    async def tick_at(self, when: datetime) -> None:
        self.clock.now = when
        await self.scheduler.tick(when)

    async def delivered(self) -> list[Delivery]:
        return await self.broker.consume(["default"], 1000, 0.01)

    async def work(self) -> list[TaskRun]:
        """What a worker would run now: the deliveries whose claim wins."""
        keys = [(d.task_run_id, d.attempt) for d in await self.delivered()]
        return await self.store.claim(keys, "w1", self.clock.now)

    async def finish(self, claimed: list[TaskRun]) -> None:
        """Complete ``claimed`` as a worker would (successfully, at once)."""
        now = self.clock.now
        await self.store.complete(
            [
                Outcome(tr.id, tr.attempt, TaskRunState.SUCCESS, now, started_at=now)
                for tr in claimed
            ]
        )


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


async def test_work_due_within_the_window_is_handed_out_for_its_instant(store: Store) -> None:
    c = Cluster(store)
    soon = await c.at_job("soon", 0.5)  # before the next poll: the loop queues it itself
    later = await c.at_job("later", 180)
    far = await c.at_job("far", 600)

    await c.tick_at(T0)

    assert [(d.task_run_id, instant) for d, instant in c.broker.handed_out] == [
        (later.id, minutes(3))
    ]
    (queued,) = await c.task_runs("later")
    assert (queued.state, queued.queued_at) == (S.QUEUED, minutes(3))
    assert [tr.state for tr in await c.task_runs("soon") + await c.task_runs("far")] == [
        S.SCHEDULED,
        S.SCHEDULED,
    ]
    assert await c.work() == []

    await c.tick_at(T0 + timedelta(seconds=0.5))
    assert [tr.id for tr in await c.work()] == [soon.id]  # straight to the broker, due now
    c.clock.now = minutes(3) - timedelta(microseconds=1)
    assert await c.work() == []  # not before its instant
    c.clock.now = minutes(3)
    assert [tr.id for tr in await c.work()] == [later.id]

    await c.tick_at(minutes(5) + timedelta(seconds=1))  # far enters the window
    assert c.broker.handed_out[-1][0].task_run_id == far.id


async def test_cron_fires_are_created_and_handed_out_ahead_and_run_once_each(
    store: Store,
) -> None:
    c = Cluster(store)
    await c.cron_job("every-minute")
    ran: list[tuple[datetime, datetime]] = []  # (logical date, when it was claimed)
    step = timedelta(seconds=20)
    while c.clock.now < minutes(15):
        await c.tick_at(c.clock.now + step)
        claimed = await c.work()
        ran += [(tr.logical_date, c.clock.now) for tr in claimed]
        # Finished like a real worker would: left running with no heartbeat, the reaper takes
        # them as lost and retries them (the lost-worker budget), and they are claimed again.
        await c.finish(claimed)

    assert [fire for fire, _ in ran] == [minutes(m) for m in range(1, 16)]
    assert all(fire <= claimed < fire + step for fire, claimed in ran)
    # The fires of the next five minutes already exist, handed out for their instants.
    ahead = [tr for tr in await c.task_runs("every-minute") if tr.state is S.QUEUED]
    assert [tr.logical_date for tr in ahead] == [minutes(m) for m in range(16, 21)]
    assert all(tr.queued_at == tr.logical_date for tr in ahead)
    assert c.broker.waiting() == 5


async def test_pausing_takes_back_handed_out_work_so_none_of_it_runs(store: Store) -> None:
    c = Cluster(store)
    await c.cron_job("every-minute")
    at_run = await c.at_job("once", 180)
    await c.tick_at(T0 + timedelta(seconds=1))
    assert c.broker.waiting() == 6  # 10:01 .. 10:05 and the `at` run

    await c.services.pause("every-minute")
    await c.services.pause("once")

    assert await c.task_runs("every-minute") == []  # fires created ahead: given back
    (back,) = await c.task_runs("once")
    assert (back.state, back.queued_at) == (S.SCHEDULED, None)
    await c.tick_at(minutes(6) + timedelta(seconds=1))
    assert await c.work() == []  # the broker delivers what it holds; nothing claims
    assert c.broker.waiting() == 0

    await c.services.resume("once")
    await c.services.resume("every-minute")
    await c.tick_at(c.clock.now)
    work = await c.work()
    assert sorted(tr.logical_date for tr in work) == [minutes(3), minutes(6)]
    assert at_run.id in {tr.id for tr in work}
    missed = [tr for tr in await c.task_runs("every-minute") if tr.state is S.SKIPPED]
    assert [tr.logical_date for tr in missed] == [minutes(m) for m in range(1, 6)]


async def test_a_handed_out_run_that_is_cancelled_claims_nothing_at_its_instant(
    store: Store,
) -> None:
    c = Cluster(store)
    tr = await c.at_job("once", 180)
    await c.tick_at(T0)
    detail = await c.services.cancel_run(tr.run_id)
    assert detail.run.state is RunState.CANCELLED

    c.clock.now = minutes(3)
    assert await c.work() == []


async def test_changing_a_cron_job_replans_the_fires_handed_out_ahead(store: Store) -> None:
    c = Cluster(store)
    await c.cron_job("job")
    await c.tick_at(T0 + timedelta(seconds=30))
    old = {tr.id for tr in await c.task_runs("job")}
    assert len(old) == 5

    await c.services.update_job("job", {"tasks": (shell_task("echo", "new"),)})
    await c.tick_at(T0 + timedelta(seconds=31))

    fresh = await c.task_runs("job")
    assert {tr.id for tr in fresh}.isdisjoint(old)
    assert [tr.logical_date for tr in fresh] == [minutes(m) for m in range(1, 6)]
    assert {tr.config["argv"][-1] for tr in fresh} == {"new"}
    c.clock.now = minutes(1)
    work = await c.work()  # the old fire's delivery comes too, and claims nothing
    assert [(tr.logical_date, tr.config["argv"][-1]) for tr in work] == [(minutes(1), "new")]

    every_5 = Schedule(kind=ScheduleKind.CRON, cron="*/5 * * * *", timezone="UTC")
    await c.services.update_job("job", {"schedule": every_5})
    await c.tick_at(minutes(1) + timedelta(seconds=1))
    left = [(tr.logical_date, tr.state) for tr in await c.task_runs("job")]
    assert left == [(minutes(1), S.RUNNING), (minutes(5), S.QUEUED)]


async def test_deleting_a_job_leaves_no_future_runs_and_nothing_to_claim(store: Store) -> None:
    c = Cluster(store)
    await c.cron_job("job")
    await c.tick_at(T0 + timedelta(seconds=30))
    assert c.broker.waiting() == 5

    await c.services.delete_job("job")

    c.clock.now = minutes(6)
    assert await c.work() == []
    page = await store.list_runs()
    assert page.runs == []  # not five cancelled runs from the future


async def test_reconciler_resends_handed_out_work_only_after_its_instant(store: Store) -> None:
    c = Cluster(store)
    tr = await c.at_job("once", 180)
    await c.tick_at(T0)
    c.broker = ClockedBroker(c.clock)  # the broker lost everything (a Redis FLUSHALL)
    c.scheduler = Scheduler(
        store,
        c.broker,
        clock=c.clock,
        rand=random.random,
        make_id=new_id,
        config=SchedulerConfig(window=WINDOW, resend_after=30),
    )

    await c.tick_at(minutes(3) + timedelta(seconds=29))
    assert await c.work() == []  # not unclaimed for long enough after its instant
    await c.tick_at(minutes(3) + timedelta(seconds=31))
    assert [w.id for w in await c.work()] == [tr.id]


async def test_a_new_leader_hands_out_again_what_was_queued_ahead(store: Store) -> None:
    c = Cluster(store)
    tr = await c.at_job("once", 180)
    await c.tick_at(T0)
    successor = ClockedBroker(c.clock)  # the new leader's connection; the old one's is gone
    c.broker = successor
    task = asyncio.create_task(c.new_scheduler().run())
    try:
        await eventually(lambda: asyncio.sleep(0.01, successor.handed_out), bool)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert [(d.task_run_id, instant) for d, instant in successor.handed_out] == [
        (tr.id, minutes(3))
    ]
    assert await c.work() == []  # handed out for its instant, not published now


@pytest.mark.parametrize("window", [0.0])
async def test_without_a_window_work_waits_in_the_store_until_due(
    store: Store, window: float
) -> None:
    c = Cluster(store, window=window)
    await c.at_job("once", 180)
    await c.cron_job("every-minute")
    await c.tick_at(T0 + timedelta(seconds=30))
    assert c.broker.handed_out == []
    (tr,) = await c.task_runs("once")
    assert tr.state is S.SCHEDULED
    assert await c.task_runs("every-minute") == []  # created one second ahead, not five minutes
