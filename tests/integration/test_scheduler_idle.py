"""The scheduler loop at rest: a pass with nothing due reads the store once (``next_work``),
and work that appears meanwhile is still found and dispatched (on both databases)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers import eventually, make_job
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import RunTrigger, Schedule, ScheduleKind, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Delivery
from tickwork.scheduler.loop import Scheduler, SchedulerConfig
from tickwork.store import SqlStore

#: What a pass read before ``next_work`` stood for them all.
PASS_READS = ("due_cron_jobs", "running_backfills", "due_task_runs", "next_fire_at", "next_due_at")


class Counted:
    """``store`` with a count of the calls made to each of its methods."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


def _now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
async def running(store: SqlStore) -> AsyncIterator[tuple[Scheduler, Counted, MemoryBroker]]:
    counted, broker = Counted(store), MemoryBroker()
    config = SchedulerConfig(max_sleep=0.05, window=300.0, housekeeping_every=3600.0)
    sched = Scheduler(
        counted,
        broker,
        clock=_now,
        rand=random.random,
        make_id=new_id,
        config=config,
    )
    task = asyncio.create_task(sched.run())
    yield sched, counted, broker
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _passes(sched: Scheduler, n: int) -> None:
    async def passes() -> int:
        return sched.passes

    await eventually(passes, lambda done: done >= n)


async def test_an_idle_pass_reads_the_store_once(
    running: tuple[Scheduler, Counted, MemoryBroker],
) -> None:
    sched, counted, _ = running
    await _passes(sched, 2)  # the first pass's housekeeping is behind us
    before, passes = Counter(counted.calls), sched.passes

    await _passes(sched, passes + 10)

    calls = counted.calls - before
    assert calls["next_work"] >= 10
    assert {name: calls[name] for name in PASS_READS} == dict.fromkeys(PASS_READS, 0)
    assert set(calls) == {"next_work"}  # nothing else: no housekeeping due, nothing due


async def test_work_created_while_idle_is_dispatched_at_its_instant_or_ahead(
    running: tuple[Scheduler, Counted, MemoryBroker],
) -> None:
    sched, counted, broker = running
    await _passes(sched, 3)
    store, now = counted.store, _now()
    soon, later = now + timedelta(seconds=0.3), now + timedelta(seconds=60)
    created = {}
    for name, due in (("soon", soon), ("later", later)):
        job = make_job(name, now=now, schedule=Schedule(kind=ScheduleKind.AT, at=due))
        job_run = new_run(job, due, trigger=RunTrigger.SCHEDULE, now=now, make_id=new_id)
        await store.create_jobs([(job, [job_run])])
        created[name] = job_run.task_runs[0].id

    async def delivered() -> list[Delivery]:
        return await broker.consume(["default"], 10, 0.05)

    # ``soon`` is queued by the loop at its instant; ``later`` handed to the broker ahead.
    (first,) = await eventually(delivered, lambda got: len(got) == 1)
    assert first.task_run_id == created["soon"]
    assert _now() >= soon
    ahead = await store.get_task_run(created["later"])
    assert ahead is not None and ahead.state is TaskRunState.QUEUED
    assert ahead.queued_at == later  # claimable at its instant, not before
