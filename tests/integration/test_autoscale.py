"""``--autoscale``: a real worker pool (SQLite store, memory broker, the shell runner) grows
to MAX while its queue has long tasks waiting, and shrinks back to MIN once idle; the new
concurrency reaches the metric and the process registry (``tickwork status``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TypeVar

from tests.helpers import eventually, make_job, shell_task
from tests.integration.test_pool_delivery import insert, now, running_pool, state_of, waits_for
from tests.observe.metric_values import value
from tickwork.broker.memory import MemoryBroker
from tickwork.core.autoscale import Bounds
from tickwork.core.model import Job, NewRun, RunTrigger, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Store, WorkerInfo
from tickwork.scheduler.loop import deliveries
from tickwork.serve.autoscale import autoscale, reregister
from tickwork.serve.observed import track_slots

T = TypeVar("T")


async def test_the_pool_grows_under_load_and_shrinks_when_idle(
    sqlite_store: Store, tmp_path: Path
) -> None:
    broker = MemoryBroker()
    release = tmp_path / "go"
    info = WorkerInfo("w1", "host", 1, ("default",), 1, now(), now(), kind="worker")
    await sqlite_store.register_worker(info)
    async with running_pool(sqlite_store, broker, concurrency=1) as pool:
        track_slots(pool)
        scaling = asyncio.create_task(
            autoscale(
                pool,
                broker,
                ("default",),
                Bounds(1, 5),
                every=0.05,
                on_change=reregister(sqlite_store, info),
            )
        )
        try:
            runs = [await insert(sqlite_store, waits_for(release)) for _ in range(8)]
            await broker.publish([d for nr in runs for d in deliveries(nr.task_runs)])

            # Eight tasks that take long: one slot each, up to MAX.
            await eventually(lambda: _now((pool.concurrency, pool.busy)), lambda v: v == (5, 5))
            assert value("tickwork_worker_concurrency") == 5
            assert value("tickwork_worker_process_slots", state="busy") == 5
            registered = await eventually(
                sqlite_store.list_workers, lambda ws: [w.concurrency for w in ws] == [5]
            )
            assert registered[0].started_at == info.started_at

            release.touch()
            await all_succeed(sqlite_store, runs)
            await eventually(lambda: _now(pool.concurrency), lambda c: c == 1)
            assert value("tickwork_worker_concurrency") == 1
            await eventually(
                sqlite_store.list_workers, lambda ws: [w.concurrency for w in ws] == [1]
            )
        finally:
            scaling.cancel()
            await asyncio.gather(scaling, return_exceptions=True)


async def test_a_backlog_of_short_tasks_does_not_grow_it(sqlite_store: Store) -> None:
    """Six runs of `true` are a fraction of a second of work: the MIN slots finish them in
    time, so the concurrency stays (six long tasks would take it to six)."""
    broker = MemoryBroker()
    async with running_pool(sqlite_store, broker, concurrency=2, expected_duration=0.01) as pool:
        seen: list[int] = []

        async def record(concurrency: int) -> None:
            seen.append(concurrency)

        scaling = asyncio.create_task(
            autoscale(pool, broker, ("default",), Bounds(2, 8), every=0.02, on_change=record)
        )
        try:
            job = make_job("short", now=now(), task=shell_task("true"))  # milliseconds each
            runs = [queued_run(job) for _ in range(6)]
            await sqlite_store.create_jobs([(job, runs)])
            await broker.publish([d for nr in runs for d in deliveries(nr.task_runs)])
            await all_succeed(sqlite_store, runs)
            assert seen == [] and pool.concurrency == 2
        finally:
            scaling.cancel()
            await asyncio.gather(scaling, return_exceptions=True)


async def _now(v: T) -> T:
    return v


def queued_run(job: Job) -> NewRun:
    t = now()
    return new_run(
        job, t, trigger=RunTrigger.ENQUEUE, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )


async def all_succeed(store: Store, runs: list[NewRun]) -> None:
    async def states() -> set[TaskRunState]:
        return {await state_of(store, nr) for nr in runs}

    await eventually(states, lambda s: s == {TaskRunState.SUCCESS})
