"""What only the Redis broker has: several consumers, stored messages, a server that fails.

Tests that flush or restart Redis use a private server (``private_redis``), never the
shared one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis

import tickwork.broker.redis as redis_broker
from tests.adapters.conftest import entries
from tests.helpers import eventually
from tests.redis_server import PrivateRedis
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.broker.redis_keys import GROUP, RedisKeys
from tickwork.ports import BrokerUnavailable, Delivery

Factory = Callable[..., RedisStreamsBroker]


def d(task_run_id: str, priority: int = 0, queue: str = "default") -> Delivery:
    return Delivery(task_run_id, 1, queue, priority)


@pytest.fixture
async def brokers(redis_url: str, redis_prefix: str) -> AsyncIterator[Factory]:
    """Consumers of one shared set of streams (one prefix), closed at the end."""
    made: list[RedisStreamsBroker] = []

    def make(**options: float) -> RedisStreamsBroker:
        made.append(RedisStreamsBroker(redis_url, prefix=redis_prefix, **options))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for broker in made:
        await broker.close()


async def test_a_dead_consumers_unacked_messages_go_to_another(brokers: Factory) -> None:
    dead = brokers(reclaim_idle=0.3, reclaim_every=0.05)
    alive = brokers(reclaim_idle=0.3, reclaim_every=0.05)
    await dead.publish([d("orphan")])
    taken = await dead.consume(["default"], 10, 1.0)
    await dead.close()  # dies without acking

    assert await alive.consume(["default"], 10, 0.0) == []  # not idle long enough yet
    started = time.monotonic()
    reclaimed = await eventually(lambda: alive.consume(["default"], 10, 0.2), bool, timeout=5)

    assert reclaimed == taken and reclaimed[0].receipt == taken[0].receipt
    assert time.monotonic() - started < 2.0


async def test_acked_messages_are_not_reclaimed(brokers: Factory) -> None:
    first = brokers(reclaim_idle=0.2, reclaim_every=0.05)
    other = brokers(reclaim_idle=0.2, reclaim_every=0.05)
    await first.publish([d("done")])
    await first.ack(await first.consume(["default"], 10, 1.0))

    deadline = time.monotonic() + 0.8  # four times the idle time
    while (left := deadline - time.monotonic()) > 0:
        assert await other.consume(["default"], 10, left) == []


async def test_consumers_of_stopped_workers_are_forgotten_unless_they_hold_messages(
    brokers: Factory, client: aioredis.Redis, redis_prefix: str
) -> None:
    stopped, holding = brokers(), brokers()
    await holding.publish([d("held")])
    assert await holding.consume(["default"], 10, 1.0)  # pending with it, never acked
    assert await stopped.consume(["default"], 10, 0.0) == []  # a member, nothing pending
    await stopped.close()
    await holding.close()
    sweeper = brokers(reclaim_idle=60, reclaim_every=0.05, forget_consumer_after=0.2)
    stream = RedisKeys(redis_prefix).stream("default", "normal")

    async def members() -> set[str]:
        await sweeper.consume(["default"], 10, 0.05)
        return {str(c["name"]) for c in await client.xinfo_consumers(stream, GROUP)}

    left = await eventually(members, lambda names: stopped.consumer not in names, timeout=5)

    assert holding.consumer in left


async def _script_calls(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("eval", "evalsha"))


async def _blocked(client: aioredis.Redis, consumer: str) -> bool:
    clients = await client.client_list()
    return any(c["name"] == f"tickwork:{consumer}" and "b" in c["flags"] for c in clients)


async def _count_blocked(client: aioredis.Redis, consumers: list[str]) -> int:
    return sum([await _blocked(client, c) for c in consumers])


async def test_a_message_wakes_one_waiting_consumer_and_arrives_with_the_wake_up(
    private_redis: PrivateRedis,
) -> None:
    raw = aioredis.Redis.from_url(private_redis.url, decode_responses=True)
    idle = [RedisStreamsBroker(private_redis.url, prefix="one") for _ in range(2)]
    publisher = RedisStreamsBroker(private_redis.url, prefix="one")
    waiters = [asyncio.create_task(b.consume(["default"], 10, 30.0)) for b in idle]
    try:
        for broker in idle:
            await eventually(lambda b=broker: _blocked(raw, b.consumer), bool)  # type: ignore[misc]
        scripts = await _script_calls(raw)
        await publisher.publish([d("only")])
        done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        (winner,) = done
        (loser,) = pending
        assert [x.task_run_id for x in winner.result()] == ["only"]
        assert await _script_calls(raw) == scripts  # no consumer ran the take script
        assert await _blocked(raw, idle[waiters.index(loser)].consumer)
        # Taking the next message one at a time needs no script call either.
        again = idle[waiters.index(winner)]
        waiters[waiters.index(winner)] = asyncio.create_task(again.consume(["default"], 10, 30.0))
        await eventually(lambda: _count_blocked(raw, [b.consumer for b in idle]), lambda n: n == 2)
        await publisher.publish([d("next")])
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        assert [x.task_run_id for x in done.pop().result()] == ["next"]
        assert await _script_calls(raw) == scripts
    finally:
        for task in waiters:
            task.cancel()
        for broker in [*idle, publisher]:
            await broker.close()
        await raw.aclose()


async def test_idle_polls_that_time_out_run_no_script_and_still_see_a_message(
    private_redis: PrivateRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The blocking reads end after MAX_BLOCK_MS and a reclaim pass is due every
    # reclaim_every: either runs the script again by design. Both well above the test's
    # quarter of a second, so a CI machine that starves it for a while still tests the polls.
    monkeypatch.setattr(redis_broker, "MAX_BLOCK_MS", 4500)
    raw = aioredis.Redis.from_url(private_redis.url, decode_responses=True)
    idle = RedisStreamsBroker(private_redis.url, prefix="poll", reclaim_every=60.0)
    publisher = RedisStreamsBroker(private_redis.url, prefix="poll")
    try:
        assert await idle.consume(["default"], 10, 0.05) == []  # takes once, then blocks
        scripts = await _script_calls(raw)
        for _ in range(5):  # a worker's fetch loop, idle: each call times out
            assert await idle.consume(["default"], 10, 0.05) == []
        assert await _script_calls(raw) == scripts
        await publisher.publish([d("late")])
        got = await idle.consume(["default"], 10, 5.0)
        assert [x.task_run_id for x in got] == ["late"]
    finally:
        for broker in (idle, publisher):
            await broker.close()
        await raw.aclose()


async def test_a_message_read_for_a_queue_no_longer_asked_goes_back(brokers: Factory) -> None:
    fickle, other = brokers(), brokers()
    waiter = asyncio.create_task(fickle.consume(["a"], 10, 0.3))
    assert await waiter == []  # its blocking read of queue "a" stays in flight
    await other.publish([d("for-a", queue="a")])
    assert await fickle.consume(["b"], 10, 0.2) == []  # asked for "b" now: gives "a" back

    got = await other.consume(["a"], 10, 1.0)

    assert [x.task_run_id for x in got] == ["for-a"]


async def test_ack_removes_the_entry_from_stream_and_pending_list(
    brokers: Factory, client: aioredis.Redis, redis_prefix: str
) -> None:
    broker = brokers()
    stream = RedisKeys(redis_prefix).stream("default", "high")
    await broker.publish([d("x", 3), d("y", 3)])
    got = await broker.consume(["default"], 10, 1.0)
    pending_before = (await client.xpending(stream, GROUP))["pending"]

    await broker.ack(got[:1])

    assert pending_before == 2
    assert (await client.xpending(stream, GROUP))["pending"] == 1
    assert [e[0] for e in await entries(client, stream)] == [got[1].receipt]


async def test_messages_carry_ids_and_nothing_else(
    brokers: Factory, client: aioredis.Redis, redis_prefix: str
) -> None:
    broker = brokers()
    await broker.publish([Delivery("tr-1", 4, "gpu", -2)])

    stored = await entries(client, RedisKeys(redis_prefix).stream("gpu", "low"))

    [(_, fields)] = stored
    assert list(fields) == ["m"]
    assert json.loads(fields["m"]) == {"id": "tr-1", "attempt": 4, "queue": "gpu", "priority": -2}


async def test_entries_that_are_not_deliveries_are_dropped(
    brokers: Factory, client: aioredis.Redis, redis_prefix: str
) -> None:
    broker = brokers()
    stream = RedisKeys(redis_prefix).stream("default", "normal")
    await client.xadd(stream, {"m": "rm -rf /"})
    await client.xadd(stream, {"m": json.dumps({"id": "x", "attempt": "1"})})
    await client.xadd(stream, {"m": json.dumps({"id": "y", "attempt": 1, "queue": "other"})})
    await client.xadd(stream, {"cmd": "anything"})
    await broker.publish([d("real")])

    got = await broker.consume(["default"], 10, 1.0)

    assert [x.task_run_id for x in got] == ["real"]
    assert [e[0] for e in await entries(client, stream)] == [got[0].receipt]


async def test_keys_live_under_the_prefix_hash_tag(
    brokers: Factory, client: aioredis.Redis, redis_prefix: str
) -> None:
    broker = brokers()
    await broker.publish([d("a", 1, "q1")])
    await broker.publish_at([(d("b", 0, "q2"), datetime.now(UTC) + timedelta(hours=1))])
    await broker.consume(["q1", "q2"], 10, 0.1)

    keys = {key async for key in client.scan_iter(match=f"*{redis_prefix}*")}

    assert keys and all(key.startswith(f"{{{redis_prefix}}}:") for key in keys)
    assert f"{{{redis_prefix}}}:delayed:q2:normal" in keys


# -- a server that goes away ------------------------------------------------------------------
async def test_after_flushall_the_broker_keeps_working(private_redis: PrivateRedis) -> None:
    broker = RedisStreamsBroker(private_redis.url, prefix="flush")
    raw = aioredis.Redis.from_url(private_redis.url)
    try:
        await broker.publish([d("before")])
        assert [x.task_run_id for x in await broker.consume(["default"], 10, 1.0)] == ["before"]

        await raw.flushall()  # streams, groups and pending entries gone

        await broker.publish([d("after")])
        got = await broker.consume(["default"], 10, 1.0)
        await broker.ack(got)
        at = datetime.now(UTC) + timedelta(seconds=0.2)
        await broker.publish_at([(d("delayed"), at)])
        later = await broker.consume(["default"], 10, 2.0)
    finally:
        await broker.close()
        await raw.aclose()

    assert [x.task_run_id for x in got] == ["after"]
    assert [x.task_run_id for x in later] == ["delayed"]


async def test_a_restarted_server_is_used_again_without_the_caller_crashing(
    private_redis: PrivateRedis,
) -> None:
    broker = RedisStreamsBroker(private_redis.url, prefix="restart")
    try:
        await broker.publish([d("lost")])
        private_redis.stop()

        started = time.monotonic()
        assert await broker.consume(["default"], 10, 0.5) == []
        assert time.monotonic() - started < 3.0
        await broker.publish([d("dropped")])  # logged and dropped, not raised
        await broker.ack([Delivery("x", 1, receipt="1-0")])
        with pytest.raises(BrokerUnavailable):
            await broker.depths()

        private_redis.start()  # same port, empty: "lost" and "dropped" are gone
        await broker.publish([d("back")])
        got = await eventually(lambda: broker.consume(["default"], 10, 0.5), bool, timeout=10)
    finally:
        await broker.close()

    assert [x.task_run_id for x in got] == ["back"]


async def test_a_waiting_consumer_survives_a_flush_under_it(private_redis: PrivateRedis) -> None:
    broker = RedisStreamsBroker(private_redis.url, prefix="flush-wait")
    raw = aioredis.Redis.from_url(private_redis.url)
    try:
        assert await broker.consume(["default"], 10, 0.1) == []  # groups exist, then vanish
        await raw.flushall()
        await broker.publish([d("new")])
        got = await broker.consume(["default"], 10, 2.0)
    finally:
        await broker.close()
        await raw.aclose()

    assert [x.task_run_id for x in got] == ["new"]


async def test_forgot_tells_once_that_redis_lost_its_data(
    brokers: Factory, client: aioredis.Redis, redis_prefix: str
) -> None:
    broker = brokers()
    assert await broker.forgot()  # a fresh Redis: the marker is set now
    assert not await broker.forgot()
    await client.delete(RedisKeys(redis_prefix).epoch())  # what FLUSHALL does to it
    assert await broker.forgot()
    assert not await broker.forgot()
