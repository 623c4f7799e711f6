"""Cancel signals over Redis: a key with a TTL per requested attempt, and pub/sub.

``request`` sets ``{prefix}:cancel:<task_run_id>:<attempt>`` (expiring after ``ttl``) and
publishes the keys on ``{prefix}:cancel`` in one transaction. A listener subscribes, then
looks up the keys of the attempts it is watching, so a request made before it subscribed
(or while its connection was down) is still seen.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from typing import Any

from tickwork.broker.redis_keys import UNREACHABLE, Backoff, RedisKeys, connect
from tickwork.ports import TaskKey

log = logging.getLogger("tickwork.broker")


class RedisCancelSignals:
    """`CancelSignals` over Redis, configured by a URL and a key prefix."""

    def __init__(self, url: str, *, prefix: str = "tickwork", ttl: float = 300.0) -> None:
        self._keys = RedisKeys(prefix)
        self._ttl_ms = max(1, int(ttl * 1000))
        self._client = connect(url, "tickwork:cancel-signals")
        # Its own client, without retries: a subscription that fails must surface here, so
        # that the listener re-reads the keys it may have missed while it was away.
        self._listen_client = connect(url, "tickwork:cancel-listener", retries=0)
        self._backoff = Backoff(log, "cancel signals")
        self._closed = False

    async def request(self, keys: Sequence[TaskKey]) -> None:
        if not keys:
            return
        pipe = self._client.pipeline(transaction=True)
        for key in keys:
            pipe.set(self._keys.cancel(key), "1", px=self._ttl_ms)
        pipe.publish(self._keys.cancel_channel(), json.dumps([list(k) for k in keys]))
        try:
            await pipe.execute()
        except UNREACHABLE as exc:
            self._backoff.failed(exc)
            log.warning(
                "cancel of %d attempt(s) not signalled; workers see it on heartbeat", len(keys)
            )
        else:
            self._backoff.succeeded()

    async def listen(
        self, watching: Callable[[], Collection[TaskKey]]
    ) -> AsyncIterator[list[TaskKey]]:
        while not self._closed:
            try:
                async for keys in self._subscribed(watching):
                    yield keys
            except UNREACHABLE as exc:
                if not self._closed:  # (closing drops the subscription's connection)
                    await asyncio.sleep(self._backoff.failed(exc))

    async def _subscribed(
        self, watching: Callable[[], Collection[TaskKey]]
    ) -> AsyncIterator[list[TaskKey]]:
        async with self._listen_client.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(self._keys.cancel_channel())
            early = await self._requested(list(watching()))
            self._backoff.succeeded()
            if early:
                yield early
            async for message in pubsub.listen():
                if message.get("type") == "message" and (keys := _parse(message["data"])):
                    yield keys

    async def _requested(self, keys: list[TaskKey]) -> list[TaskKey]:
        if not keys:
            return []
        found = await self._listen_client.mget([self._keys.cancel(k) for k in keys])
        return [k for k, value in zip(keys, found, strict=True) if value is not None]

    async def close(self) -> None:
        self._closed = True
        await self._client.aclose()
        await self._listen_client.aclose()


def _parse(data: Any) -> list[TaskKey]:
    """The keys of a published request; anything else is ignored."""
    try:
        items = json.loads(data)
    except (TypeError, ValueError):
        return []
    if not isinstance(items, list):
        return []
    return [
        (item[0], item[1])
        for item in items
        if isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and type(item[1]) is int
    ]
