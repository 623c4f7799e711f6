"""One suite for every CancelSignals: in memory, over Redis and over RabbitMQ (real servers)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis

from tests.helpers import eventually
from tests.rabbitmq_server import delete_cancel_stream
from tests.rabbitmq_server import shared_url as rabbitmq_url
from tests.redis_server import PrivateRedis
from tickwork.broker.rabbitmq_signals import RabbitMQCancelSignals
from tickwork.broker.redis_keys import RedisKeys
from tickwork.broker.redis_signals import RedisCancelSignals
from tickwork.broker.signals import MemoryCancelSignals
from tickwork.ports import CancelSignals, TaskKey


@dataclass
class Harness:
    signals: CancelSignals
    forget: Callable[[TaskKey], Awaitable[None]]  # let the remembered request expire


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def redis_key_gone(url: str, key: str) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        await eventually(lambda: client.exists(key), lambda n: n == 0, timeout=5)
    finally:
        await client.aclose()


@pytest.fixture(params=["memory", "redis", "rabbitmq"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    if request.param == "memory":
        clock = FakeMonotonic()

        async def advance(_: TaskKey) -> None:
            clock.now += 0.5

        memory = MemoryCancelSignals(ttl=0.3, clock=clock)
        yield Harness(memory, advance)
        await memory.close()
        return
    if request.param == "rabbitmq":
        rabbit_prefix = f"test-{os.urandom(4).hex()}"
        rabbit = RabbitMQCancelSignals(rabbitmq_url(), prefix=rabbit_prefix, ttl=0.3)

        async def aged(_: TaskKey) -> None:
            await asyncio.sleep(0.4)  # older than the ttl: what a listener is told to skip

        yield Harness(rabbit, aged)
        await rabbit.close()
        await delete_cancel_stream(rabbitmq_url(), rabbit_prefix)
        return
    url: str = request.getfixturevalue("redis_url")
    prefix: str = request.getfixturevalue("redis_prefix")
    signals = RedisCancelSignals(url, prefix=prefix, ttl=0.3)

    async def expired(key: TaskKey) -> None:
        await redis_key_gone(url, RedisKeys(prefix).cancel(key))

    yield Harness(signals, expired)
    await signals.close()


@dataclass
class Listener:
    """Collects what ``listen`` yields; ``subscribed`` is set each time it asks what we watch."""

    watching: Collection[TaskKey] = ()
    batches: list[list[TaskKey]] = field(default_factory=list)
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)
    subscriptions: int = 0
    task: asyncio.Task[None] | None = None

    def start(self, signals: CancelSignals) -> Listener:
        self.task = asyncio.create_task(self._run(signals))
        return self

    async def ready(self) -> None:
        await asyncio.wait_for(self.subscribed.wait(), 10)

    def keys(self) -> list[TaskKey]:
        return [k for batch in self.batches for k in batch]

    async def got(self, key: TaskKey, timeout: float = 5) -> None:
        async def probe() -> list[TaskKey]:
            return self.keys()

        await eventually(probe, lambda keys: key in keys, timeout=timeout, interval=0.005)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def _watched(self) -> Collection[TaskKey]:
        self.subscriptions += 1
        self.subscribed.set()
        return self.watching

    async def _run(self, signals: CancelSignals) -> None:
        async for keys in signals.listen(self._watched):
            self.batches.append(keys)


async def test_a_listener_gets_a_request_within_a_fraction_of_a_second(harness: Harness) -> None:
    listener = Listener().start(harness.signals)
    await listener.ready()

    started = time.monotonic()
    await harness.signals.request([("tr-1", 2), ("tr-2", 1)])
    await listener.got(("tr-2", 1))
    await listener.stop()

    assert time.monotonic() - started < 0.5
    assert listener.keys() == [("tr-1", 2), ("tr-2", 1)]


async def test_every_listener_gets_every_request(harness: Harness) -> None:
    a, b = Listener().start(harness.signals), Listener().start(harness.signals)
    await a.ready()
    await b.ready()

    await harness.signals.request([("tr-1", 1)])
    await a.got(("tr-1", 1))
    await b.got(("tr-1", 1))
    await a.stop()
    await b.stop()


async def test_a_late_listener_sees_earlier_requests_of_attempts_it_watches(
    harness: Harness,
) -> None:
    await harness.signals.request([("running", 1), ("other-attempt", 2), ("elsewhere", 1)])

    listener = Listener(watching=[("running", 1), ("other-attempt", 1), ("idle", 1)])
    listener.start(harness.signals)
    await listener.got(("running", 1))
    await listener.stop()

    assert listener.batches[0] == [("running", 1)]


async def test_an_expired_request_is_not_seen_by_a_late_listener(harness: Harness) -> None:
    await harness.signals.request([("old", 1)])
    await harness.forget(("old", 1))

    listener = Listener(watching=[("old", 1)]).start(harness.signals)
    await listener.ready()
    await harness.signals.request([("new", 1)])
    await listener.got(("new", 1))
    await listener.stop()

    assert listener.keys() == [("new", 1)]


async def test_requesting_nothing_signals_nothing(harness: Harness) -> None:
    listener = Listener().start(harness.signals)
    await listener.ready()

    await harness.signals.request([])
    await harness.signals.request([("marker", 1)])
    await listener.got(("marker", 1))
    await listener.stop()

    assert listener.batches == [[("marker", 1)]]


async def test_listening_ends_when_the_signals_are_closed(harness: Harness) -> None:
    listener = Listener().start(harness.signals)
    await listener.ready()
    assert listener.task is not None

    await harness.signals.close()

    await asyncio.wait_for(listener.task, 5)
    assert listener.task.exception() is None


# -- Redis only --------------------------------------------------------------------------------
async def test_redis_request_keys_expire(redis_url: str, redis_prefix: str) -> None:
    signals = RedisCancelSignals(redis_url, prefix=redis_prefix, ttl=60)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await signals.request([("tr", 3)])
        ttl_ms = await client.pttl(RedisKeys(redis_prefix).cancel(("tr", 3)))
    finally:
        await signals.close()
        await client.aclose()

    assert 0 < ttl_ms <= 60_000


async def test_redis_listener_resubscribes_after_a_restart_and_sees_what_it_missed(
    private_redis: PrivateRedis,
) -> None:
    signals = RedisCancelSignals(private_redis.url, prefix="restart")
    listener = Listener(watching=[("running", 1)]).start(signals)
    try:
        await listener.ready()
        private_redis.stop()
        await signals.request([("running", 1)])  # lost with the server: no raise
        private_redis.start()
        await signals.request([("running", 1)])  # now remembered, maybe before it resubscribes
        await listener.got(("running", 1), timeout=15)
    finally:
        await listener.stop()
        await signals.close()

    assert listener.subscriptions >= 2
