"""The worker pool's claims beside its fetch loop (``PoolConfig.claims_in_flight``): a
message that lands while a claim commits is read and claimed at once, not after that commit;
with one claim in flight it waits; a claim that fails stops the pool; a drain hands back
what a claim in flight won. A real SQLite store and in-memory broker; the store's claim
is held open by a gate to make "while a claim commits" last as long as the test needs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.helpers import eventually, make_job, shell_task
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import Job, NewRun, RunTrigger, TaskRun, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Store, TaskKey
from tickwork.scheduler.loop import deliveries
from tickwork.worker.config import PoolConfig
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runners import build_runners, close_runners


def now() -> datetime:
    return datetime.now(UTC)


class GatedClaims:
    """The store, with its first claim held until ``opened`` is set (the rest pass through),
    and each claim's keys recorded when it is sent."""

    def __init__(self, store: Store, *, fail: bool = False) -> None:
        self._store = store
        self._fail = fail
        self.opened = asyncio.Event()
        self.sent: list[list[TaskKey]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def claim(self, keys: Sequence[TaskKey], worker_id: str, at: datetime) -> list[TaskRun]:
        self.sent.append(list(keys))
        if self._fail:
            raise RuntimeError("claim broke")
        if len(self.sent) == 1:
            await self.opened.wait()
        return await self._store.claim(keys, worker_id, at)


async def queued(store: Store, name: str) -> NewRun:
    job: Job = make_job(f"{name}-{new_id()}", now=now(), task=shell_task("true"))
    t = now()
    nr = new_run(
        job, t, trigger=RunTrigger.MANUAL, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await store.create_jobs([(job, [nr])])
    return nr


async def publish(broker: MemoryBroker, nr: NewRun) -> None:
    await broker.publish(deliveries(nr.task_runs))


async def state(store: Store, nr: NewRun) -> TaskRunState:
    found = await store.get_run(nr.run.id)
    assert found is not None
    return found.task_runs[0].state


async def states(store: Store, *runs: NewRun) -> list[TaskRunState]:
    return [await state(store, nr) for nr in runs]


def pool_of(store: Any, broker: MemoryBroker, in_flight: int) -> WorkerPool:
    config = PoolConfig(
        worker_id="w1", concurrency=4, heartbeat_interval=60.0, claims_in_flight=in_flight
    )
    return WorkerPool(store, broker, build_runners(), config, clock=now, rand=random.random)


@pytest.mark.parametrize("in_flight", [2, 1])
async def test_a_message_landing_while_a_claim_commits_is_claimed_beside_it(
    sqlite_store: Store, in_flight: int
) -> None:
    broker, gated = MemoryBroker(), GatedClaims(sqlite_store)
    first, second = await queued(sqlite_store, "first"), await queued(sqlite_store, "second")
    pool = pool_of(gated, broker, in_flight)
    loops = asyncio.create_task(pool.run())
    try:
        await publish(broker, first)
        await eventually(lambda: asyncio.sleep(0, len(gated.sent)), lambda n: n == 1)
        await publish(broker, second)
        if in_flight == 2:  # read and claimed, and run, while the first claim is held
            await eventually(lambda: state(sqlite_store, second), lambda s: s == "success")
            assert await state(sqlite_store, first) == TaskRunState.QUEUED
        else:  # the fetch loop waits for the first claim before it reads again
            await asyncio.sleep(0.3)
            assert len(gated.sent) == 1
            assert await state(sqlite_store, second) == TaskRunState.QUEUED
        gated.opened.set()
        await eventually(
            lambda: states(sqlite_store, first, second), lambda s: s == ["success"] * 2
        )
        assert sorted(k for keys in gated.sent for k, _ in keys) == sorted(
            [first.task_runs[0].id, second.task_runs[0].id]
        )
    finally:
        gated.opened.set()
        await pool.drain(0.5)
        loops.cancel()
        await asyncio.gather(loops, return_exceptions=True)
        await close_runners(pool._runners)


async def test_a_claim_that_raises_stops_the_pool(sqlite_store: Store) -> None:
    broker, gated = MemoryBroker(), GatedClaims(sqlite_store, fail=True)
    nr = await queued(sqlite_store, "broken")
    pool = pool_of(gated, broker, 2)
    loops = asyncio.create_task(pool.run())
    try:
        await publish(broker, nr)
        with pytest.raises(RuntimeError, match="claim broke"):
            await asyncio.wait_for(loops, 5.0)
        assert await state(sqlite_store, nr) == TaskRunState.QUEUED
    finally:
        loops.cancel()
        await asyncio.gather(loops, return_exceptions=True)
        await close_runners(pool._runners)


async def test_a_drain_waits_for_a_claim_in_flight_and_runs_what_it_won(
    sqlite_store: Store,
) -> None:
    broker, gated = MemoryBroker(), GatedClaims(sqlite_store)
    nr = await queued(sqlite_store, "drained")
    pool = pool_of(gated, broker, 2)
    loops = asyncio.create_task(pool.run())
    try:
        await publish(broker, nr)
        await eventually(lambda: asyncio.sleep(0, len(gated.sent)), lambda n: n == 1)
        draining = asyncio.create_task(pool.drain(5.0))
        await asyncio.sleep(0.2)
        assert not draining.done()  # the claim is still in flight
        gated.opened.set()
        await asyncio.wait_for(draining, 5.0)
        assert await state(sqlite_store, nr) == TaskRunState.SUCCESS
    finally:
        gated.opened.set()
        loops.cancel()
        await asyncio.gather(loops, return_exceptions=True)
        await close_runners(pool._runners)
