"""One suite for every Broker: MemoryBroker, RedisStreamsBroker (on a real Redis) and
RabbitMQBroker (on the shared RabbitMQ, queues of a prefix of the test's own)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis

from tests.helpers import eventually
from tests.rabbitmq_server import delete_queues
from tests.rabbitmq_server import shared_url as rabbitmq_url
from tickwork.broker.memory import MemoryBroker
from tickwork.broker.rabbitmq import RabbitMQBroker
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.ports import Broker, Delivery


def d(task_run_id: str, priority: int = 0, queue: str = "default", attempt: int = 1) -> Delivery:
    return Delivery(task_run_id, attempt, queue, priority)


def ids(deliveries: list[Delivery]) -> list[str]:
    return [x.task_run_id for x in deliveries]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Harness:
    broker: Broker
    blocked: Callable[[], Awaitable[bool]]  # is a consume call waiting inside the broker?


async def redis_blocked(url: str, broker: RedisStreamsBroker) -> bool:
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        clients = await client.client_list()
    finally:
        await client.aclose()
    name = f"tickwork:{broker.consumer}"
    return any(c["name"] == name and "b" in c["flags"] for c in clients)


@pytest.fixture(params=["memory", "redis", "rabbitmq"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    if request.param == "memory":
        memory = MemoryBroker()

        async def waiting() -> bool:
            return memory.waiting_consumers > 0

        yield Harness(memory, waiting)
        await memory.close()
        return
    if request.param == "rabbitmq":
        prefix = f"test-{os.urandom(4).hex()}"
        rabbit = RabbitMQBroker(rabbitmq_url(), prefix=prefix)

        async def rabbit_waiting() -> bool:
            return rabbit.waiting_consumers > 0

        yield Harness(rabbit, rabbit_waiting)
        await rabbit.close()
        await delete_queues(rabbitmq_url(), prefix, ["default", "a", "b", "c", "q"])
        return
    url: str = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")
    broker = RedisStreamsBroker(url, prefix=prefix)
    yield Harness(broker, lambda: redis_blocked(url, broker))
    await broker.close()


async def consume_until(
    broker: Broker, until: datetime, enough: int | None = None
) -> list[tuple[Delivery, datetime]]:
    """Every delivery up to the instant ``until`` (or until ``enough`` came), with when it
    was received."""
    got: list[tuple[Delivery, datetime]] = []
    while (left := (until - utcnow()).total_seconds()) > 0 and len(got) < (enough or 1 << 30):
        batch = await broker.consume(["default"], 100, left)
        received = utcnow()
        got += [(x, received) for x in batch]
        await broker.ack(batch)
    return got


# -- order ----------------------------------------------------------------------------------
async def test_higher_lanes_are_consumed_first(harness: Harness) -> None:
    await harness.broker.publish([d("low", -5), d("normal", 0), d("high", 7), d("low2", -5)])

    got = await harness.broker.consume(["default"], 10, 1.0)

    assert ids(got) == ["high", "normal", "low", "low2"]


async def test_a_high_message_overtakes_a_backlog(harness: Harness) -> None:
    await harness.broker.publish([d(f"n{i}") for i in range(50)])
    await harness.broker.publish([d("urgent", 1)])

    got = await harness.broker.consume(["default"], 1, 1.0)

    assert ids(got) == ["urgent"]


async def test_within_a_lane_first_in_first_out_across_publishes(harness: Harness) -> None:
    first, second = [d(f"a{i}") for i in range(30)], [d(f"b{i}") for i in range(30)]
    await harness.broker.publish(first)
    await harness.broker.publish(second)

    got: list[Delivery] = []
    while batch := await harness.broker.consume(["default"], 7, 0.2):
        assert len(batch) <= 7
        got += batch

    assert ids(got) == ids(first + second)


async def test_consume_takes_at_most_max_items_per_call(harness: Harness) -> None:
    await harness.broker.publish([d(f"t{i}", p) for i, p in enumerate([1, 0, -1] * 4)])

    sizes = [len(await harness.broker.consume(["default"], 5, 0.2)) for _ in range(4)]

    assert sizes == [5, 5, 2, 0]


async def test_consume_takes_only_from_the_queues_asked(harness: Harness) -> None:
    await harness.broker.publish([d("in-a", queue="a"), d("in-b", 5, queue="b")])

    assert ids(await harness.broker.consume(["a"], 10, 0.2)) == ["in-a"]
    assert ids(await harness.broker.consume(["c"], 10, 0.1)) == []
    assert ids(await harness.broker.consume(["a", "b"], 10, 0.2)) == ["in-b"]


async def test_priority_applies_across_queues(harness: Harness) -> None:
    await harness.broker.publish([d("a-normal", queue="a"), d("b-high", 3, queue="b")])

    got = await harness.broker.consume(["a", "b"], 10, 1.0)

    assert ids(got) == ["b-high", "a-normal"]


# -- waiting ----------------------------------------------------------------------------------
async def test_a_waiting_consume_returns_as_soon_as_a_message_arrives(harness: Harness) -> None:
    waiter = asyncio.create_task(harness.broker.consume(["default"], 10, 30.0))
    await eventually(harness.blocked, bool, timeout=5)

    started = time.monotonic()
    await harness.broker.publish([d("wake")])
    got = await asyncio.wait_for(waiter, 5)

    assert ids(got) == ["wake"]
    assert time.monotonic() - started < 1.0


async def test_consume_gives_up_after_its_timeout(harness: Harness) -> None:
    started = time.monotonic()
    got = await harness.broker.consume(["default"], 10, 0.3)

    assert got == []
    assert 0.29 <= time.monotonic() - started < 2.0


# -- delayed delivery -----------------------------------------------------------------------
async def test_publish_at_delivers_at_the_instant_and_not_before(harness: Harness) -> None:
    at = utcnow() + timedelta(seconds=0.4)
    await harness.broker.publish_at([(d("later"), at)])

    # Never before the instant; how soon after is a benchmark's matter (bench/broker.py, B1
    # lateness): on a loaded machine a delivery 2.5 s late was seen.
    got = await consume_until(harness.broker, at + timedelta(seconds=15), enough=1)

    assert [x.task_run_id for x, _ in got] == ["later"]
    received = got[0][1]
    assert at <= received < at + timedelta(seconds=15)


async def test_publish_at_in_the_past_delivers_now(harness: Harness) -> None:
    await harness.broker.publish_at([(d("overdue"), utcnow() - timedelta(hours=1))])

    assert ids(await harness.broker.consume(["default"], 10, 0.5)) == ["overdue"]


async def test_publish_at_twice_ahead_delivers_once(harness: Harness) -> None:
    at = utcnow() + timedelta(seconds=0.3)
    await harness.broker.publish_at([(d("once"), at), (d("once"), at)])
    await harness.broker.publish_at([(d("once"), at + timedelta(seconds=0.2))])
    await harness.broker.publish_at([(d("once", attempt=2), at)])  # another attempt: its own

    got = await consume_until(harness.broker, at + timedelta(seconds=1.2))

    assert sorted((x.task_run_id, x.attempt) for x, _ in got) == [("once", 1), ("once", 2)]


async def test_a_sooner_delayed_message_wakes_a_consumer_waiting_for_a_later_one(
    harness: Harness,
) -> None:
    await harness.broker.publish_at([(d("far"), utcnow() + timedelta(seconds=30))])
    waiter = asyncio.create_task(harness.broker.consume(["default"], 10, 10.0))
    await eventually(harness.blocked, bool, timeout=5)

    soon = utcnow() + timedelta(seconds=0.2)
    await harness.broker.publish_at([(d("soon"), soon)])
    got = await asyncio.wait_for(waiter, 5)

    assert ids(got) == ["soon"]
    assert utcnow() - soon < timedelta(seconds=1)


async def test_delayed_messages_keep_their_lane(harness: Harness) -> None:
    at = utcnow() + timedelta(seconds=0.2)
    await harness.broker.publish_at([(d("low", -1), at), (d("high", 1), at)])

    got = await consume_until(harness.broker, at + timedelta(seconds=1))

    assert [x.task_run_id for x, _ in got] == ["high", "low"]


# -- ack and depths ---------------------------------------------------------------------------
async def test_acked_messages_are_not_delivered_again(harness: Harness) -> None:
    await harness.broker.publish([d("one"), d("two")])
    got = await harness.broker.consume(["default"], 10, 1.0)
    await harness.broker.ack(got)

    assert await harness.broker.consume(["default"], 10, 0.3) == []
    assert (await harness.broker.depths()).get("default", 0) == 0


async def test_depths_count_the_messages_waiting_per_queue(harness: Harness) -> None:
    await harness.broker.publish([d("a1", 1, "a"), d("a2", 0, "a"), d("a3", -1, "a")])
    await harness.broker.publish([d("b1", 0, "b")])
    await harness.broker.publish_at([(d("later", 0, "b"), utcnow() + timedelta(hours=1))])

    before = await harness.broker.depths()
    await harness.broker.consume(["a"], 2, 1.0)
    after = await harness.broker.depths()

    assert (before["a"], before["b"]) == (3, 1)
    assert (after["a"], after["b"]) == (1, 1)


async def test_receipts_take_no_part_in_equality(harness: Harness) -> None:
    await harness.broker.publish([d("same", 2, "q", attempt=3)])

    got = await harness.broker.consume(["q"], 1, 1.0)

    assert got == [d("same", 2, "q", attempt=3)]
