"""A single enqueue over Redis is answered once its publish is written, before Redis's reply
(``SendsAhead``): a publish Redis then refuses fails no caller, is logged, and its run, durable
at the commit, is re-sent by the scheduler's ``Resender`` like any lost message."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import redis.asyncio as aioredis

from tests.helpers import FakeClock, eventually, shell_task, utc
from tickwork.app.enqueue import EnqueueItem
from tickwork.app.records import JobSpec
from tickwork.app.services import Services
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.broker.redis_keys import RedisKeys
from tickwork.core.model import Schedule, ScheduleKind, TaskRunState
from tickwork.ids import new_id
from tickwork.ports import SendsAhead, Store
from tickwork.scheduler.loop import Scheduler, SchedulerConfig

T0 = utc(2026, 3, 2, 10, 0)
YEARLY = Schedule(kind=ScheduleKind.CRON, cron="0 0 1 1 *", timezone="UTC")


@pytest.fixture
async def broker(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisStreamsBroker]:
    b = RedisStreamsBroker(redis_url, prefix=redis_prefix)
    yield b
    await b.close()


async def test_a_refused_publish_after_the_answer_is_re_sent_by_the_scheduler(
    store: Store,
    broker: RedisStreamsBroker,
    redis_url: str,
    redis_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert isinstance(broker, SendsAhead)
    clock = FakeClock(T0)
    services = Services(store, broker, clock=clock)
    await services.create_job(JobSpec("work", YEARLY, (shell_task("true"),)))
    stream = RedisKeys(redis_prefix).stream("default", "normal")

    async def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "tickwork.broker"]

    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    scheduler = Scheduler(
        store, broker, clock=clock, rand=random.random, make_id=new_id, config=SchedulerConfig()
    )
    try:
        await scheduler.tick(clock.now)  # up before the enqueue (its first pass re-sends all)
        caplog.clear()
        await client.set(stream, "not a stream")  # every XADD to the lane is refused
        with caplog.at_level(logging.ERROR, logger="tickwork.broker"):
            (done,) = await services.enqueue_many("work", [EnqueueItem()], batch=False)
            (message,) = await eventually(logged, bool, timeout=5)  # after the call returned
        assert "refused 1 message(s)" in message
        task_run = await store.get_task_run(done.task_run_ids[0])
        assert task_run is not None
        assert task_run.state is TaskRunState.QUEUED  # committed before the publish
        await client.delete(stream)

        clock.now = T0 + timedelta(seconds=2)
        await scheduler.tick(clock.now)
        assert await client.xlen(stream) == 0  # not yet: re-sent after 30 s unclaimed
        clock.now = T0 + timedelta(seconds=32)
        await scheduler.tick(clock.now)
        got = await broker.consume(["default"], 10, 1.0)
        assert [d.task_run_id for d in got] == [done.task_run_ids[0]]
    finally:
        await client.aclose()
