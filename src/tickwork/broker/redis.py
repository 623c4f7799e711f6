"""The broker of distributed mode: Redis Streams with one consumer group.

Layout (names in ``redis_keys``): one stream per (queue, priority lane), a sorted set per
(queue, lane) for messages published ahead, and a one-entry "wake" stream per queue. A
consume call is one Lua script (``lua/take.lua``) that moves due delayed messages into
their streams, reclaims what dead consumers left pending, and reads new messages highest
lane first. When it finds nothing, the call waits on three things at once: an
``XREADGROUP … BLOCK`` of those streams, which Redis serves to ONE blocked consumer per
new message (the message comes with the wake-up, so it costs no second read, and the
other idle workers sleep on); a plain ``XREAD`` of the wake streams (delayed work was
added: every consumer re-reads its next due time); and a local timer for the next due
message. Redis checks the timeouts of blocked commands only ``hz`` times a second (every
100 ms by default), which is why due times are kept by the client's timer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.resources
import logging
import math
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio.client import Pipeline
from redis.exceptions import ResponseError

from tickwork.broker.redis_keys import (
    GROUP,
    LANES,
    UNREACHABLE,
    Backoff,
    RedisKeys,
    connect,
    decode,
    encode,
    lane_of,
)
from tickwork.broker.redis_publish import ReadyPublisher
from tickwork.broker.redis_reads import GroupRead, Layout, Step, Watcher, end_read
from tickwork.ports import BrokerUnavailable, Delivery

log = logging.getLogger("tickwork.broker")

_TAKE = importlib.resources.files("tickwork.broker").joinpath("lua/take.lua").read_text()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
MOVE_LIMIT = 1000  # delayed messages one script call moves per (queue, lane) at most
MAX_BLOCK_MS = 2000  # one blocking XREAD at most (below the client's 5 s socket timeout)
SHORT_WAIT = 0.005  # seconds; a due time this close is waited for without watching Redis


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _floor_ms(at: datetime) -> int:
    return (at - _EPOCH) // _MS


def _ceil_ms(at: datetime) -> int:
    # Rounded up, so that a message is never moved before its instant.
    return -((_EPOCH - at) // _MS)


class RedisStreamsBroker:
    """A `Broker` over Redis Streams, configured by a URL and a key prefix.

    Priority lanes: ``high`` (priority > 0), ``normal`` (0, the default) and ``low``
    (< 0), a stream each per queue; a consume reads higher lanes first, so a high-priority
    message never waits behind a backlog of default ones. Within a lane, FIFO.

    Every consumer is a member of the group ``workers``; a message it read stays pending
    until acked (``XACK`` + ``XDEL``, so streams hold only unfinished work). Messages
    pending longer than ``reclaim_idle`` seconds are taken over (``XAUTOCLAIM``) by a live
    consumer, checked every ``reclaim_every`` seconds. A long-running attempt's message may
    therefore be taken over once; the new claim in the store loses and acks it. Consumers
    idle for ``forget_consumer_after`` seconds with nothing pending (stopped workers) are
    removed from the group on those passes.

    Redis down, restarted or flushed: nothing raises but ``depths``; groups are recreated
    on ``NOGROUP``; what was lost the scheduler re-sends from the store.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "tickwork",
        consumer: str | None = None,
        reclaim_idle: float = 30.0,
        reclaim_every: float = 5.0,
        forget_consumer_after: float = 3600.0,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        if reclaim_idle <= 0:
            raise ValueError("reclaim_idle must be positive")
        self._keys = RedisKeys(prefix)
        self._consumer = consumer or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._client = connect(url, f"tickwork:{self._consumer}")
        self._ready = ReadyPublisher(
            url, f"tickwork:{self._consumer}:publish", self._client, self._keys
        )
        self._take = self._client.register_script(_TAKE)
        self._reclaim_idle_ms = max(1, int(reclaim_idle * 1000))
        self._reclaim_every = reclaim_every
        self._forget_ms = max(1, int(forget_consumer_after * 1000))
        self._next_reclaim = 0.0
        self._clock = clock
        self._turn = 0
        self._watcher: Watcher | None = None  # XREAD of the wake streams
        self._group_read: GroupRead | None = None  # XREADGROUP of the streams
        self._received: list[Delivery] = []  # what a group read brought, not yet returned
        self._due_at = math.inf  # monotonic time the next delayed message is due
        self._fresh: frozenset[str] | None = None  # see _may_skip_take
        self._backoff = Backoff(log, f"broker {self._consumer}")
        self._closed = False

    @property
    def consumer(self) -> str:
        """This consumer's name in the group (also its client name, ``tickwork:<name>``)."""
        return self._consumer

    # -- publishing ------------------------------------------------------------------------
    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        if deliveries:
            await self._send(self._ready.publish(deliveries), "publish", len(deliveries))

    async def send_ahead(self, deliveries: Sequence[Delivery]) -> None:
        """``SendsAhead``: the publish written, its reply read later (``_sent``)."""
        if deliveries:
            count = len(deliveries)
            await self._ready.send_ahead(deliveries, lambda exc: self._sent(exc, count))

    def _sent(self, exc: Exception | None, count: int) -> None:
        if exc is None:
            self._backoff.succeeded()
        elif isinstance(exc, UNREACHABLE):
            self._backoff.failed(exc)
            log.warning("publish: %d message(s) dropped; the scheduler re-sends them", count)
        else:  # refused by Redis after the caller was answered: its runs wait in the store
            log.error(
                "publish: Redis refused %d message(s) (%s); the scheduler re-sends them",
                count, exc,
            )  # fmt: skip

    async def publish_at(self, items: Sequence[tuple[Delivery, datetime]]) -> None:
        if not items:
            return
        now = self._clock()
        ready = [d for d, at in items if at <= now]
        later = [(d, at) for d, at in items if at > now]
        pipe = self._client.pipeline(transaction=False)
        if ready:
            self._add_ready(pipe, ready)
        if later:
            self._add_delayed(pipe, later)
        await self._send(pipe.execute(), "publish_at", len(items))

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        if all(d.receipt is None for d in deliveries):
            return
        pipe = self._client.pipeline(transaction=False)
        self._add_acks(pipe, deliveries)
        await self._send(pipe.execute(), "ack", len(deliveries))

    def _add_acks(self, pipe: Pipeline, deliveries: Sequence[Delivery]) -> None:
        """One ``XACK`` and one ``XDEL`` per stream for the whole batch."""
        by_stream: dict[str, list[str]] = {}
        for d in deliveries:
            if d.receipt is not None:
                key = self._keys.stream(d.queue, lane_of(d.priority))
                by_stream.setdefault(key, []).append(d.receipt)
        for key, ids in by_stream.items():
            pipe.xack(key, GROUP, *ids)
            pipe.xdel(key, *ids)

    def _add_ready(self, pipe: Pipeline, deliveries: Sequence[Delivery]) -> None:
        for d in deliveries:
            pipe.xadd(self._keys.stream(d.queue, lane_of(d.priority)), {"m": encode(d)})
        pipe.sadd(self._keys.queues(), *{d.queue for d in deliveries})

    def _add_delayed(self, pipe: Pipeline, items: Sequence[tuple[Delivery, datetime]]) -> None:
        by_set: dict[str, dict[str, int]] = {}
        for d, at in items:
            members = by_set.setdefault(self._keys.delayed(d.queue, lane_of(d.priority)), {})
            members.setdefault(encode(d), _ceil_ms(at))  # the first instant given wins
        for key, members in by_set.items():
            pipe.zadd(key, members, nx=True)  # NX: one already waiting keeps its instant
        queues = {d.queue for d, _ in items}
        pipe.sadd(self._keys.queues(), *queues)
        for queue in queues:  # consumers may sleep until a later due time: wake them
            pipe.xadd(self._keys.wake(queue), {"w": "1"}, maxlen=1, approximate=False)

    async def _send(self, sending: Awaitable[Any], what: str, count: int) -> None:
        try:
            await sending
        except UNREACHABLE as exc:
            self._backoff.failed(exc)
            log.warning("%s: %d message(s) dropped; the scheduler re-sends them", what, count)
        else:
            self._backoff.succeeded()

    # -- consuming -------------------------------------------------------------------------
    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        if max_items < 1 or not queues or self._closed:
            return []
        deadline = time.monotonic() + timeout
        try:
            deliveries = await self._consume(self._layout(queues), max_items, deadline)
        except UNREACHABLE as exc:
            self._drop_watcher()
            pause = self._backoff.failed(exc)
            await asyncio.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            return []
        self._backoff.succeeded()
        return deliveries

    async def _consume(self, layout: Layout, max_items: int, deadline: float) -> list[Delivery]:
        while True:
            if self._received:
                return await self._from_received(layout, max_items)
            newest: dict[str, str] | None = None  # None: the wake read in flight stays
            if not self._may_skip_take(layout):
                step = await self._step(layout, max_items)
                if step.deliveries:
                    return step.deliveries
                if step.taken:  # only malformed entries, now dropped: look again
                    continue
                newest = step.newest
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:  # (freshness kept: the reads in flight still see what is new)
                return []
            self._fresh = None
            wait = min(remaining, self._due_at - now, max(self._next_reclaim - now, 0.0))
            await self._wait(layout, newest, wait, max_items)

    def _may_skip_take(self, layout: Layout) -> bool:
        """Whether the script has nothing to do that the next group read will not: the last
        wait ended with a group read of these streams (anything newer, or left over beyond
        its count, the next one returns at once), the wake read is still in flight, and no
        delayed message or reclaim pass is due. Saves a script call per message when idle
        workers take messages one at a time."""
        watcher = self._watcher
        return (
            self._fresh == frozenset(layout.streams)
            and watcher is not None
            and not watcher.task.done()
            and watcher.keys == set(layout.wakes)
            and time.monotonic() < min(self._due_at, self._next_reclaim)
        )

    async def _from_received(self, layout: Layout, max_items: int) -> list[Delivery]:
        """What a group read brought: up to ``max_items`` of the queues asked; messages of
        queues no longer asked for go back to their streams for someone else."""
        asked = {queue for queue, _ in layout.pairs}
        other = [d for d in self._received if d.queue not in asked]
        mine = [d for d in self._received if d.queue in asked]
        self._received = mine[max_items:]
        if other:
            await self._give_back(other)
        return mine[:max_items]

    async def _give_back(self, deliveries: Sequence[Delivery]) -> None:
        """Messages read but not handed out: added anew and acked at once (atomically; if
        Redis is unreachable they stay pending, and a live consumer reclaims them)."""
        pipe = self._client.pipeline(transaction=True)
        self._add_ready(pipe, [dataclasses.replace(d, receipt=None) for d in deliveries])
        self._add_acks(pipe, deliveries)
        await self._send(pipe.execute(), "give back", len(deliveries))

    def _layout(self, queues: Sequence[str]) -> Layout:
        # Rotate the queues each call, so that within a lane no queue starves the others.
        self._turn = (self._turn + 1) % len(queues)
        order = [*queues[self._turn :], *queues[: self._turn]]
        pairs = tuple((q, lane) for lane in LANES for q in order)
        streams = tuple(self._keys.stream(q, lane) for q, lane in pairs)
        wakes = tuple(self._keys.wake(q) for q in order)
        script_keys = (
            tuple(
                key
                for (q, lane), s in zip(pairs, streams, strict=True)
                for key in (self._keys.delayed(q, lane), s)
            )
            + wakes
        )
        return Layout(pairs, script_keys, {s: i for i, s in enumerate(streams, 1)}, wakes)

    async def _step(self, layout: Layout, max_items: int) -> Step:
        reclaim_idle = self._reclaim_due()
        now_ms = _floor_ms(self._clock())
        args: list[str | int] = [GROUP, self._consumer, now_ms, max_items, len(layout.pairs)]
        taken, next_due, newest = await self._take(
            keys=layout.script_keys, args=[*args, MOVE_LIMIT, reclaim_idle, self._forget_ms]
        )
        deliveries = await self._decode(layout, taken)
        due_in = math.inf if next_due < 0 else max(0.0, (next_due - now_ms) / 1000)
        self._due_at = time.monotonic() + due_in
        ids = dict(zip(layout.wakes, newest, strict=True)) if newest else {}
        return Step(deliveries, len(taken) // 3, due_in, ids)

    def _reclaim_due(self) -> int:
        now = time.monotonic()
        if now < self._next_reclaim:
            return 0
        self._next_reclaim = now + self._reclaim_every
        return self._reclaim_idle_ms

    async def _decode(self, layout: Layout, taken: list[Any]) -> list[Delivery]:
        deliveries: list[Delivery] = []
        bad: list[tuple[str, str]] = []
        for i in range(0, len(taken), 3):
            queue, lane = layout.pairs[int(taken[i]) - 1]
            entry_id, message = str(taken[i + 1]), str(taken[i + 2])
            d = decode(message, entry_id)
            if d is None or d.queue != queue or lane_of(d.priority) != lane:
                bad.append((self._keys.stream(queue, lane), entry_id))
            else:
                deliveries.append(d)
        if bad:
            await self._drop_malformed(bad)
        return deliveries

    async def _drop_malformed(self, bad: Sequence[tuple[str, str]]) -> None:
        log.warning("dropping %d message(s) that are not tickwork deliveries", len(bad))
        pipe = self._client.pipeline(transaction=False)
        for key, entry_id in bad:
            pipe.xack(key, GROUP, entry_id)
            pipe.xdel(key, entry_id)
        await pipe.execute()

    async def _wait(
        self, layout: Layout, newest: dict[str, str] | None, seconds: float, max_items: int
    ) -> None:
        """Until a message arrives (read for this consumer: kept in ``_received``), a wake
        stream gets a new entry, or ``seconds`` pass. ``newest``: where the wake read
        starts, if a new one is needed (None: keep the one in flight)."""
        if seconds <= 0:
            return
        group, wake = self._group_read, self._watcher
        streams = frozenset(layout.streams)
        stale_wake = wake is None or (newest is not None and wake.keys != set(newest))
        if group is None or group.keys != streams or stale_wake:
            if seconds <= SHORT_WAIT:  # due in a moment: cheaper than blocking reads
                await asyncio.sleep(seconds)
                return
            group = await self._watch_streams(layout, max_items)
            if stale_wake:
                wake = self._watch_wakes(newest or dict.fromkeys(layout.wakes, "$"))
        assert wake is not None  # kept only while it still applies (not stale)
        done, _ = await asyncio.wait(
            {group.task, wake.task}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
        )
        if wake.task in done:
            self._watcher = None
            wake.task.result()  # a lost connection raises here
        if group.task in done:
            self._group_read = None
            received = await self._read_by_group(group)
            self._received += received
            if wake.task not in done and group.task.exception() is None:
                self._fresh = group.keys
        elif not done:  # timed out, both reads still blocking: they see anything new, so the
            self._fresh = group.keys  # next call need not run the script (an idle poll less)

    async def _watch_streams(self, layout: Layout, max_items: int) -> GroupRead:
        current = self._group_read
        if current is not None and current.keys == frozenset(layout.streams):
            return current
        await self._drop_group_read()
        read = self._client.xreadgroup(
            GROUP,
            self._consumer,
            dict.fromkeys(layout.streams, ">"),
            count=max_items,
            block=MAX_BLOCK_MS,
        )
        self._group_read = GroupRead(layout, asyncio.ensure_future(read))
        return self._group_read

    def _watch_wakes(self, newest: dict[str, str]) -> Watcher:
        current = self._watcher
        if current is not None and current.keys == set(newest):
            return current
        self._drop_wake_read()
        read = self._client.xread(newest, count=1, block=MAX_BLOCK_MS)  # type: ignore[arg-type]
        self._watcher = Watcher(frozenset(newest), asyncio.ensure_future(read))
        return self._watcher

    async def _read_by_group(self, group: GroupRead) -> list[Delivery]:
        """The deliveries a finished group read brought (a lost connection raises)."""
        try:
            reply = group.task.result()
        except ResponseError as exc:
            # A stream or the group went away under the read (FLUSHALL, a restart): the
            # next script call recreates them.
            log.debug("blocking group read ended: %s", exc)
            return []
        taken: list[Any] = []
        for stream, entries in reply or ():
            index = group.layout.streams[stream]
            for entry_id, fields in entries:
                taken += (index, entry_id, fields.get("m", ""))
        return await self._decode(group.layout, taken)

    def _drop_wake_read(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            end_read(watcher.task)

    async def _drop_group_read(self) -> None:
        """Stop the group read (the queues asked changed); what it received already goes
        back to the streams for the next consumer."""
        group, self._group_read = self._group_read, None
        if group is None:
            return
        if not group.task.done():
            group.task.cancel()  # ends its connection; an entry in flight awaits a reclaim
        elif not group.task.cancelled() and group.task.exception() is None:
            await self._give_back(await self._read_by_group(group))

    def _drop_watcher(self) -> None:
        self._drop_wake_read()
        group, self._group_read = self._group_read, None
        if group is not None:
            end_read(group.task)

    # -- status and shutdown ---------------------------------------------------------------
    async def forgot(self) -> bool:
        """Whether Redis lost its data since the last call: the epoch marker was missing (it
        is set again at once). True on the first call against a fresh Redis too; False while
        Redis cannot be reached (nothing can be re-sent then anyway)."""
        try:
            created = await self._client.set(self._keys.epoch(), secrets.token_hex(8), nx=True)
        except UNREACHABLE:
            return False
        return bool(created)

    async def ping(self) -> None:
        """Raise ``BrokerUnavailable`` unless Redis answers (readiness probes)."""
        try:
            await self._client.ping()
        except UNREACHABLE as exc:
            raise BrokerUnavailable(f"Redis unreachable: {exc}") from exc

    async def depths(self) -> dict[str, int]:
        try:
            queues = sorted(str(q) for q in await self._client.smembers(self._keys.queues()))
            pipe = self._client.pipeline(transaction=False)
            for queue in queues:
                for lane in LANES:
                    pipe.xlen(self._keys.stream(queue, lane))
                    pipe.xpending(self._keys.stream(queue, lane), GROUP)
            replies = await pipe.execute(raise_on_error=False)
        except UNREACHABLE as exc:
            raise BrokerUnavailable(f"Redis unreachable: {exc}") from exc
        depths: dict[str, int] = {}
        for i, queue in enumerate(queues):
            lanes = replies[i * 2 * len(LANES) : (i + 1) * 2 * len(LANES)]
            depths[queue] = sum(
                _waiting(length, pending)
                for length, pending in zip(lanes[::2], lanes[1::2], strict=True)
            )
        return depths

    async def close(self) -> None:
        self._closed = True
        self._drop_watcher()
        received, self._received = self._received, []
        if received:  # read but never handed out: back to the streams for another consumer
            await self._give_back(received)
        await self._ready.close()
        await self._client.aclose()


def _waiting(length: Any, pending: Any) -> int:
    """Entries in a stream minus those delivered and not yet acked (NOGROUP: none)."""
    if isinstance(length, ResponseError) or not isinstance(length, int):
        return 0
    count = 0 if isinstance(pending, ResponseError) else int(pending["pending"])
    return max(length - count, 0)
