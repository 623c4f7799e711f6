"""The worker pool against each broker: when deliveries are acked, and how cancels arrive.

A real SQLite store and the real shell runner; brokers and cancel signals in memory and on
a real Redis. Heartbeats are a minute apart here, so only a cancel signal can stop a task
within a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.helpers import eventually, make_job, shell_task
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.broker.redis_keys import GROUP, RedisKeys
from tickwork.broker.redis_signals import RedisCancelSignals
from tickwork.broker.signals import MemoryCancelSignals
from tickwork.core.model import Job, NewRun, RunDetail, RunTrigger, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.ports import Broker, CancelSignals, Delivery, Store
from tickwork.scheduler.loop import deliveries
from tickwork.worker.config import PoolConfig
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runners import build_runners, close_runners


def now() -> datetime:
    return datetime.now(UTC)


@contextlib.asynccontextmanager
async def running_pool(
    store: Store,
    broker: Broker,
    cancels: CancelSignals | None = None,
    concurrency: int = 4,
    expected_duration: float = 1.0,
) -> AsyncIterator[WorkerPool]:
    runners = build_runners()
    config = PoolConfig(
        worker_id="w1",
        concurrency=concurrency,
        heartbeat_interval=60.0,
        expected_duration=expected_duration,
    )
    pool = WorkerPool(
        store, broker, runners, config, clock=now, rand=random.random, cancels=cancels
    )
    task = asyncio.create_task(pool.run())
    try:
        yield pool
    finally:
        await pool.drain(0.5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await close_runners(runners)


async def insert(store: Store, job: Job) -> NewRun:
    t = now()
    nr = new_run(
        job, t, trigger=RunTrigger.SCHEDULE, now=t, make_id=new_id, state=TaskRunState.QUEUED
    )
    await store.create_jobs([(job, [nr])])
    return nr


async def state_of(store: Store, nr: NewRun) -> TaskRunState:
    return (await detail(store, nr)).task_runs[0].state


async def detail(store: Store, nr: NewRun) -> RunDetail:
    found = await store.get_run(nr.run.id)
    assert found is not None
    return found


def waits_for(path: Path) -> Job:
    """A shell job that runs until ``path`` exists."""
    script = 'while [ ! -e "$0" ]; do sleep 0.01; done'
    return make_job(f"waits-{new_id()}", now=now(), task=shell_task("sh", "-c", script, str(path)))


@pytest.fixture(params=["memory", "redis"])
async def wiring(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Broker, CancelSignals]]:
    broker: Broker
    cancels: CancelSignals
    if request.param == "memory":
        broker, cancels = MemoryBroker(), MemoryCancelSignals()
    else:
        url: str = request.getfixturevalue("redis_url")
        prefix: str = request.getfixturevalue("redis_prefix")
        broker, cancels = (
            RedisStreamsBroker(url, prefix=prefix),
            RedisCancelSignals(url, prefix=prefix),
        )
    yield broker, cancels
    await broker.close()
    await cancels.close()


async def test_a_cancel_signal_kills_a_running_task_within_a_second(
    sqlite_store: Store, wiring: tuple[Broker, CancelSignals], tmp_path: Path
) -> None:
    broker, cancels = wiring
    pidfile = tmp_path / "pid"
    script = f"echo $$ > {pidfile}; exec sleep 60"
    nr = await insert(
        sqlite_store, make_job("long", now=now(), task=shell_task("sh", "-c", script))
    )
    services = Services(sqlite_store, broker, cancels=cancels)
    async with running_pool(sqlite_store, broker, cancels):
        await broker.publish(deliveries(nr.task_runs))
        await eventually(lambda: state_of(sqlite_store, nr), lambda s: s is TaskRunState.RUNNING)
        await eventually(lambda: _read(pidfile), bool)

        requested = now()
        await services.cancel_run(nr.run.id)
        done = await eventually(
            lambda: detail(sqlite_store, nr), lambda d: d.task_runs[0].finished_at is not None
        )

    task_run = done.task_runs[0]
    assert task_run.state is TaskRunState.CANCELLED
    assert task_run.finished_at is not None
    assert task_run.finished_at - requested < timedelta(seconds=1)
    assert not _alive(int(pidfile.read_text()))


class AckLog(MemoryBroker):
    """A MemoryBroker that records, for each ack, the task run's state in the store then."""

    def __init__(self, store: Store, runs: dict[str, NewRun]) -> None:
        super().__init__()
        self.acked: list[tuple[str, TaskRunState]] = []
        self._store, self._runs = store, runs

    async def ack(self, items: Sequence[Delivery]) -> None:
        for item in items:
            state = await state_of(self._store, self._runs[item.task_run_id])
            self.acked.append((item.task_run_id, state))


async def test_acks_follow_the_claim_that_lost_and_the_completion_written(
    sqlite_store: Store, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    nr = await insert(sqlite_store, waits_for(release))
    task_run_id = nr.task_runs[0].id
    broker = AckLog(sqlite_store, {task_run_id: nr})
    async with running_pool(sqlite_store, broker):
        await broker.publish(deliveries(nr.task_runs) * 2)  # the second is a duplicate
        await eventually(lambda: _len(broker.acked), lambda n: n == 1)
        still = await state_of(sqlite_store, nr)
        release.touch()
        await eventually(lambda: _len(broker.acked), lambda n: n == 2)

    assert still is TaskRunState.RUNNING
    assert broker.acked == [
        (task_run_id, TaskRunState.RUNNING),  # the duplicate, when its claim lost
        (task_run_id, TaskRunState.SUCCESS),  # the one that ran, once its outcome was stored
    ]


async def test_redis_holds_the_message_of_a_running_task_until_it_finished(
    sqlite_store: Store, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    nr = await insert(sqlite_store, waits_for(release))
    stream = RedisKeys(redis_prefix).stream("default", "normal")
    client = aioredis.Redis.from_url(redis_url)
    broker = RedisStreamsBroker(redis_url, prefix=redis_prefix)
    try:
        async with running_pool(sqlite_store, broker):
            await broker.publish(deliveries(nr.task_runs) * 2)
            await eventually(
                lambda: state_of(sqlite_store, nr), lambda s: s is TaskRunState.RUNNING
            )
            # The duplicate lost its claim and is acked; the running one's stays pending.
            await eventually(lambda: _pending(client, stream), lambda n: n == 1)
            release.touch()
            await eventually(
                lambda: state_of(sqlite_store, nr), lambda s: s is TaskRunState.SUCCESS
            )
            await eventually(lambda: _pending(client, stream), lambda n: n == 0)
        length = await client.xlen(stream)
    finally:
        await broker.close()
        await client.aclose()

    assert length == 0


async def test_drain_hands_claimed_ahead_messages_to_another_worker_at_once(
    sqlite_store: Store, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    busy = await insert(sqlite_store, waits_for(tmp_path / "never"))
    waiting = await insert(sqlite_store, make_job("waiting", now=now(), task=shell_task("true")))
    broker = RedisStreamsBroker(redis_url, prefix=redis_prefix)
    other = RedisStreamsBroker(redis_url, prefix=redis_prefix)  # reclaim would take 30 s
    try:
        # Tasks believed short (50 ms), so the pool claims one ahead of its single slot.
        pool_cm = running_pool(sqlite_store, broker, concurrency=1, expected_duration=0.05)
        async with pool_cm as pool:
            await broker.publish(deliveries(busy.task_runs))
            await eventually(
                lambda: state_of(sqlite_store, busy), lambda s: s is TaskRunState.RUNNING
            )
            await broker.publish(deliveries(waiting.task_runs))
            await eventually(lambda: _active(pool), lambda n: n == 2)  # claimed ahead
        handed = await other.consume(["default"], 10, 2.0)
    finally:
        await broker.close()
        await other.close()

    assert await state_of(sqlite_store, waiting) is TaskRunState.QUEUED
    assert [d.task_run_id for d in handed] == [waiting.task_runs[0].id]


async def test_a_fresh_worker_claims_no_more_than_its_free_slots(
    sqlite_store: Store, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    """Woken alone for a burst, a worker that has not yet measured its tasks takes only what
    it can start; the rest stays in the stream for other workers (here: ``other``)."""
    busy = await insert(sqlite_store, waits_for(tmp_path / "never"))
    waiting = await insert(sqlite_store, make_job("waiting", now=now(), task=shell_task("true")))
    broker = RedisStreamsBroker(redis_url, prefix=redis_prefix)
    other = RedisStreamsBroker(redis_url, prefix=redis_prefix)
    try:
        async with running_pool(sqlite_store, broker, concurrency=1) as pool:
            await broker.publish(deliveries([*busy.task_runs, *waiting.task_runs]))
            await eventually(
                lambda: state_of(sqlite_store, busy), lambda s: s is TaskRunState.RUNNING
            )
            handed = await other.consume(["default"], 10, 2.0)
            assert pool.active_count == 1
    finally:
        await broker.close()
        await other.close()

    assert [d.task_run_id for d in handed] == [waiting.task_runs[0].id]
    assert await state_of(sqlite_store, waiting) is TaskRunState.QUEUED


async def _pending(client: aioredis.Redis, stream: str) -> int:
    return int((await client.xpending(stream, GROUP))["pending"])


async def _len(items: list[tuple[str, TaskRunState]]) -> int:
    return len(items)


async def _active(pool: WorkerPool) -> int:
    return pool.active_count


async def _read(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie not yet reaped counts as gone
    return stat.exists() and stat.read_text().split()[2] != "Z"
