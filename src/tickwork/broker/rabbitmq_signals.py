"""Cancel signals over RabbitMQ: a fanout exchange, and a stream that remembers.

``request`` publishes the keys (and when they were requested) to the fanout exchange
``<prefix>.cancels``. Bound to it is a stream queue, ``<prefix>.cancels.recent``, that keeps
what was published for ``ttl`` (``x-max-age``). A listener consumes that stream from ``ttl``
ago (``x-stream-offset``): requests made before it subscribed (or while it was cut off) come
first, and it passes on those of the attempts it watches that are younger than ``ttl``; then
every new request as it is published. A stream is read without taking from it, so every
listener sees every request.

The stream's offset is a time on the broker's clock, the ``at`` of a request one on the
publisher's: the listener starts reading ``CLOCK_SKEW`` earlier than ``ttl`` ago, and the
publisher's ``at`` decides what is young enough. (A RabbitMQ whose Erlang clock lagged the
host's by 27 s after the host's clock was set showed nothing to a listener reading from
exactly ``ttl`` ago.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractRobustConnection

from tickwork.broker.rabbitmq import FAILURES
from tickwork.broker.redis_signals import _parse
from tickwork.ports import TaskKey

log = logging.getLogger("tickwork.broker.rabbitmq")

RETRY_EVERY = 1.0  # seconds between a cut-off listener's attempts to subscribe again
#: How far the broker's clock may lag a listener's before requests are missed.
CLOCK_SKEW = timedelta(minutes=5)


class RabbitMQCancelSignals:
    """``CancelSignals`` over RabbitMQ (see the module), from an ``amqp://`` URL."""

    def __init__(self, url: str, *, prefix: str = "tickwork", ttl: float = 300.0) -> None:
        self._url = url
        self._exchange = f"{prefix}.cancels"
        self._stream = f"{prefix}.cancels.recent"
        self._ttl = ttl
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._listeners: set[AbstractConnection] = set()
        self._closed = False

    async def request(self, keys: Sequence[TaskKey]) -> None:
        if not keys:
            return
        body = json.dumps({"at": time.time(), "keys": [list(k) for k in keys]}).encode()
        try:
            channel = await self._publishing()
            exchange = await channel.get_exchange(self._exchange, ensure=False)
            await exchange.publish(aio_pika.Message(body), routing_key="")
        except FAILURES as exc:
            log.warning(
                "cancel of %d attempt(s) not signalled (%r); workers see it on heartbeat",
                len(keys),
                exc,
            )
            self._channel = None

    async def listen(
        self, watching: Callable[[], Collection[TaskKey]]
    ) -> AsyncIterator[list[TaskKey]]:
        while not self._closed:
            try:
                async for keys in self._subscribed(watching):
                    yield keys
            except FAILURES as exc:
                if not self._closed:
                    log.warning("cancel signals: %r; subscribing again", exc)
                    await asyncio.sleep(RETRY_EVERY)

    async def _subscribed(
        self, watching: Callable[[], Collection[TaskKey]]
    ) -> AsyncIterator[list[TaskKey]]:
        connection = await aio_pika.connect(self._url)
        self._listeners.add(connection)
        try:
            channel = await connection.channel()
            await self._declare(channel)
            await channel.set_qos(prefetch_count=100)  # a stream is read with credit
            queue = await channel.get_queue(self._stream, ensure=False)
            since = time.time() - self._ttl
            offset = datetime.fromtimestamp(math.floor(since), UTC) - CLOCK_SKEW
            async with queue.iterator(arguments={"x-stream-offset": offset}) as messages:
                subscribed = time.time()
                watched = set(watching())
                async for message in messages:
                    await message.ack()
                    keys = _keys(message.body, since, subscribed, watched)
                    if keys:
                        yield keys
        finally:
            self._listeners.discard(connection)
            if not connection.is_closed:
                await connection.close()

    async def _publishing(self) -> AbstractChannel:
        if self._connection is None:
            self._connection = await aio_pika.connect_robust(self._url)
        if self._channel is None or self._channel.is_closed:
            channel = await self._connection.channel(publisher_confirms=True)
            await self._declare(channel)
            self._channel = channel
        return self._channel

    async def _declare(self, channel: AbstractChannel) -> None:
        exchange = await channel.declare_exchange(
            self._exchange, aio_pika.ExchangeType.FANOUT, durable=True
        )
        age = f"{max(math.ceil(self._ttl), 1)}s"
        stream = await channel.declare_queue(
            self._stream,
            durable=True,
            arguments={"x-queue-type": "stream", "x-max-age": age},
        )
        await stream.bind(exchange)

    async def close(self) -> None:
        self._closed = True
        for connection in list(self._listeners):
            await connection.close()
        if self._connection is not None:
            await self._connection.close()


def _keys(body: bytes, since: float, subscribed: float, watched: set[TaskKey]) -> list[TaskKey]:
    """A request's keys: all of a new one; of one made before we subscribed, only those we
    watch, and only if it is younger than ``ttl``."""
    try:
        data: Any = json.loads(body)
        at = float(data["at"])
        keys = _parse(json.dumps(data["keys"]))
    except (TypeError, ValueError, KeyError):
        return []
    if at >= subscribed:
        return keys
    if at < since:
        return []
    return [k for k in keys if k in watched]
