"""The broker's publish connection (``broker/redis_publish``): commands written as RESP, replies
matched in order, failures raised as redis-py raises them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tests.adapters.conftest import entries
from tests.helpers import eventually
from tickwork.broker import redis_publish
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.broker.redis_keys import RedisKeys
from tickwork.broker.redis_publish import RawPublisher, ReadyPublisher, pack
from tickwork.ports import Delivery

NAME = f"tickwork:test-publish-{uuid.uuid4().hex}"


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[RawPublisher]:
    publisher = RawPublisher.of(redis_url, NAME)
    assert publisher is not None
    yield publisher
    await publisher.close()


def test_only_plain_tcp_urls_get_a_raw_connection() -> None:
    assert RawPublisher.of("redis://127.0.0.1:6379/0", "n") is not None
    assert RawPublisher.of("rediss://127.0.0.1:6379/0", "n") is None
    assert RawPublisher.of("unix:///tmp/redis.sock?db=2", "n") is None


def test_commands_are_resp_arrays_of_bulk_strings() -> None:
    packed = pack([("SET", "k", "é"), (b"GET", b"k")])
    assert (
        packed == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n\xc3\xa9\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
    )


async def test_replies_of_each_kind_come_back_in_order(
    raw: RawPublisher, client: aioredis.Redis, redis_prefix: str
) -> None:
    key, stream = f"{{{redis_prefix}}}:set", f"{{{redis_prefix}}}:stream"
    replies = await raw.execute(
        [
            ("SADD", key, "a", "b"),
            ("XADD", stream, "*", "m", "x" * 5000),
            ("GET", key + "-none"),
            ("SET", key + "-str", "v"),
        ]
    )
    assert replies[0] == 2 and replies[2] is None and replies[3] == b"OK"
    assert await entries(client, stream) == [(replies[1].decode(), {"m": "x" * 5000})]


async def test_a_refused_command_raises_and_the_connection_stays_in_step(
    raw: RawPublisher, client: aioredis.Redis, redis_prefix: str
) -> None:
    key = f"{{{redis_prefix}}}:plain"
    await client.set(key, "a string")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await raw.execute([("SADD", key, "x"), ("GET", key)])
    assert await raw.execute([("GET", key)]) == [b"a string"]


async def test_concurrent_calls_share_the_connection_and_each_gets_its_replies(
    raw: RawPublisher, redis_prefix: str
) -> None:
    key = f"{{{redis_prefix}}}:counter"

    async def incr(by: int) -> int:
        (reply,) = await raw.execute([("INCRBY", key, str(by))])
        return int(reply)

    totals = await asyncio.gather(*(incr(1) for _ in range(200)))
    assert sorted(totals) == list(range(1, 201))


async def test_the_url_s_database_is_selected(redis_url: str, redis_prefix: str) -> None:
    base = redis_url.rsplit("/", 1)[0]
    publisher = RawPublisher.of(f"{base}/3", "tickwork:test-db")
    other = aioredis.Redis.from_url(f"{base}/3", decode_responses=True)
    key = f"{{{redis_prefix}}}:in-db-3"
    try:
        assert publisher is not None
        await publisher.execute([("SET", key, "here")])
        assert await other.get(key) == "here"
    finally:
        await other.delete(key)
        await other.aclose()
        if publisher is not None:
            await publisher.close()


async def test_a_refused_handshake_is_a_connection_error(redis_url: str) -> None:
    host_port = redis_url.split("//", 1)[1].split("/", 1)[0]
    publisher = RawPublisher.of(f"redis://:not-the-password@{host_port}/0", "n")
    assert publisher is not None
    with pytest.raises(RedisConnectionError, match="refused"):
        await publisher.execute([("PING",)])
    await publisher.close()


async def test_a_server_that_stops_answering_times_out_and_is_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"SETNAME\r\n")  # the handshake: answered
        await reader.readline()
        await reader.readline()
        writer.write(b"+OK\r\n")
        await reader.read()  # then reads to the end, answers nothing
        writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setattr(redis_publish, "REPLY_TIMEOUT_S", 0.2)
    publisher = RawPublisher.of(f"redis://127.0.0.1:{port}/0", "n")
    assert publisher is not None
    try:
        with pytest.raises(RedisTimeoutError):
            await publisher.execute([("PING",)])
        with pytest.raises(RedisTimeoutError):  # a new connection, answered the same way
            await publisher.execute([("PING",)])
    finally:
        await publisher.close()
        server.close()
        await server.wait_closed()


async def test_a_stale_connection_is_replaced_once(
    raw: RawPublisher, client: aioredis.Redis, redis_prefix: str
) -> None:
    key = f"{{{redis_prefix}}}:after-kill"
    await raw.execute([("PING",)])
    (ours,) = [c for c in await client.client_list() if c["name"] == NAME]
    await client.client_kill(ours["addr"])
    await raw.execute([("SET", key, "1")])
    assert await client.get(key) == "1"


async def test_ready_publisher_adds_the_queue_set_only_now_and_then(
    redis_url: str, client: aioredis.Redis, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = RedisKeys(redis_prefix)
    ready = ReadyPublisher(redis_url, "tickwork:test-ready", client, keys)
    try:
        await ready.publish([Delivery("tr-1", 1, "default", 5)])
        assert await client.smembers(keys.queues()) == {"default"}
        await client.delete(keys.queues())
        await ready.publish([Delivery("tr-2", 1, "default", 0)])
        assert not await client.exists(keys.queues())  # added lately: the XADD alone
    finally:
        await ready.close()
    monkeypatch.setattr(redis_publish, "QUEUE_SET_EVERY_S", 0.0)
    again = ReadyPublisher(redis_url, "tickwork:test-ready", client, keys)
    try:
        await again.publish([Delivery("tr-3", 1, "default", 0)])
        await client.delete(keys.queues())
        await again.publish([Delivery("tr-4", 1, "default", 0)])
        assert await client.smembers(keys.queues()) == {"default"}  # due again: added
    finally:
        await again.close()
    high = await entries(client, keys.stream("default", "high"))
    normal = await entries(client, keys.stream("default", "normal"))
    assert [f["m"] for _, f in high] == ['{"id":"tr-1","attempt":1,"queue":"default","priority":5}']
    assert len(normal) == 3


async def test_a_broker_on_a_server_that_went_away_drops_the_publish(
    redis_url: str, redis_prefix: str
) -> None:
    broker = RedisStreamsBroker("redis://127.0.0.1:1/0", prefix=redis_prefix)
    try:
        await broker.publish([Delivery("lost", 1, "default", 0)])  # logged, not raised
    finally:
        await broker.close()


def _outcome() -> asyncio.Future[Exception | None]:
    """A ``done`` for ``RawPublisher.send``: the future it settles."""
    return asyncio.get_running_loop().create_future()


async def test_send_returns_once_written_and_hands_the_replies_to_done(
    raw: RawPublisher, client: aioredis.Redis, redis_prefix: str
) -> None:
    stream, plain = f"{{{redis_prefix}}}:stream", f"{{{redis_prefix}}}:plain"
    await raw.execute([("PING",)])  # connected: send waits for nothing
    sent = _outcome()
    await raw.send([("XADD", stream, "*", "m", "a")], sent.set_result)
    assert not sent.done()  # the reply is read on a later turn of the loop
    assert await asyncio.wait_for(sent, 5) is None
    assert [f for _, f in await entries(client, stream)] == [{"m": "a"}]

    await client.set(plain, "a string")
    refused = _outcome()
    await raw.send([("XADD", plain, "*", "m", "b"), ("GET", plain)], refused.set_result)
    error = await asyncio.wait_for(refused, 5)
    assert isinstance(error, ResponseError) and "WRONGTYPE" in str(error)
    assert await raw.execute([("GET", plain)]) == [b"a string"]  # still in step


async def test_send_waits_for_its_replies_past_max_ahead_unanswered(
    raw: RawPublisher, client: aioredis.Redis, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_publish, "MAX_AHEAD", 0)
    stream = f"{{{redis_prefix}}}:stream"
    sent = _outcome()
    await raw.send([("XADD", stream, "*", "m", "a")], sent.set_result)
    assert sent.done() and sent.result() is None  # answered before send returned
    assert len(await entries(client, stream)) == 1


async def test_a_broker_logs_a_publish_sent_ahead_that_redis_refused(
    redis_url: str, client: aioredis.Redis, redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    broker = RedisStreamsBroker(redis_url, prefix=redis_prefix)
    keys = RedisKeys(redis_prefix)

    async def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "tickwork.broker"]

    try:
        await broker.send_ahead([Delivery("tr-ok", 1, "default", 0)])
        await client.set(keys.stream("default", "normal"), "a string")
        with caplog.at_level("ERROR", logger="tickwork.broker"):
            await broker.send_ahead([Delivery("tr-refused", 1, "default", 0)])  # not raised
            (message,) = await eventually(logged, bool, timeout=5)
        assert "refused 1 message(s)" in message and "WRONGTYPE" in message
    finally:
        await broker.close()
    unreachable = RedisStreamsBroker("redis://127.0.0.1:1/0", prefix=redis_prefix)
    try:
        await unreachable.send_ahead([Delivery("lost", 1, "default", 0)])  # logged, not raised
    finally:
        await unreachable.close()


async def test_close_waits_for_the_replies_of_what_send_wrote(
    redis_url: str, client: aioredis.Redis, redis_prefix: str
) -> None:
    publisher = RawPublisher.of(redis_url, NAME)
    assert publisher is not None
    stream = f"{{{redis_prefix}}}:stream"
    outcomes = [_outcome() for _ in range(50)]
    for i, sent in enumerate(outcomes):
        await publisher.send([("XADD", stream, "*", "m", str(i))], sent.set_result)
    await publisher.close()
    assert all(sent.done() and sent.result() is None for sent in outcomes)
    assert len(await entries(client, stream)) == 50
