"""The broker on RabbitMQ (AMQP 0-9-1, ``aio-pika``): quorum queues, one per queue and lane.

Layout: a durable quorum queue ``<prefix>.<queue>.<lane>`` per queue and priority lane
(``high``, ``normal``, ``low``, as on Redis). Lanes are separate queues, not the
``x-max-priority`` feature, because quorum queues (the replicated, durable kind) take no
message priorities before RabbitMQ 4.0; and a separate queue per lane lets a consumer read
the higher lane first no matter how long the lower one is.

- Publishing waits for the publisher confirms of the whole batch (the messages are then
  on a quorum of disks), ``mandatory``: a message no queue took (a queue deleted under us)
  comes back, and the queue is declared again and the message sent again.
- Consuming: one channel per lane, each with its own prefetch (``prefetch``, sized like the
  workers' claim-ahead), so a full buffer of ``normal`` messages never holds a ``high`` one
  back. Deliveries wait in a local buffer per (queue, lane); ``consume`` takes from the
  highest lane first. A message pushed to us just after a publish may still be on the wire:
  so before answering with less than was asked for, or with a lower lane's messages while a
  higher lane's buffer is empty, ``consume`` asks RabbitMQ how many messages those queues
  still hold ready, and waits a moment (``SETTLE``) for them to arrive.
- Acks are manual, sent only when the worker acks (after the durable write); a message a
  dead consumer never acked goes back to its queue when its channel closes.
- Delayed messages (``publish_at``) wait in this process on the event loop's timers, and are
  published at their instant: no delayed-message plugin. The scheduler hands work out only
  a window ahead, and what a dead process held the reconciler re-sends from the store.
- The connection is ``connect_robust``: after a broker restart it reconnects and restores
  its channels, queues and consumers. A consumer RabbitMQ cancelled (its queue deleted) is
  noticed on the next consume and the queue declared and consumed again. Nothing raises but
  ``depths`` (``BrokerUnavailable``), as the port asks.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import (
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustChannel,
    AbstractRobustConnection,
)

from tickwork.broker.redis_keys import LANES, decode, encode, lane_of
from tickwork.ports import BrokerUnavailable, Delivery, TaskKey

log = logging.getLogger("tickwork.broker.rabbitmq")

QUORUM = {"x-queue-type": "quorum"}
#: What a lost or closed connection raises (a channel of a reconnecting connection raises
#: ``ChannelInvalidStateError``, a ``RuntimeError``).
FAILURES = (
    aio_pika.exceptions.AMQPError,
    aiormq.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    OSError,
    TimeoutError,
)
CONFIRM_TIMEOUT = 15.0  # seconds a publish waits for RabbitMQ's confirms before giving up
PREFETCH = 256  # unacked messages per lane channel: the workers' claim-ahead at most
SETTLE = 0.05  # seconds to wait for messages RabbitMQ holds ready but has not pushed yet
CHECK_CONSUMERS_EVERY = 2.0  # seconds between checks that RabbitMQ did not cancel a consumer
_LANE_RANK = {lane: rank for rank, lane in enumerate(LANES)}


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Lane:
    """One lane's channel for consuming, and what its consumers brought."""

    channel: AbstractRobustChannel
    buffers: dict[str, collections.deque[AbstractIncomingMessage]] = field(default_factory=dict)
    queues: dict[str, AbstractQueue] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)  # queue -> consumer tag
    unacked: int = 0


class RabbitMQBroker:
    """A ``Broker`` over RabbitMQ (see the module), from an ``amqp://`` URL."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "tickwork",
        prefetch: int = PREFETCH,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._url = url
        self._prefix = prefix
        self._prefetch = prefetch
        self._clock = clock
        self._connection: AbstractRobustConnection | None = None
        self._publisher: AbstractRobustChannel | None = None
        self._lanes: dict[str, _Lane] = {}
        self._declared: set[str] = set()  # queue names declared on the publishing channel
        self._opening = asyncio.Lock()
        self._arrived = asyncio.Event()
        self._delayed: dict[TaskKey, asyncio.TimerHandle] = {}
        self._due: list[Delivery] = []  # delayed messages due, not yet published
        self._mover: asyncio.Task[None] | None = None
        self._next_check = 0.0
        self._receipts = 0
        self._forgot = True  # ForgetfulBroker: nothing is known to be in the queues yet
        self._inflight: dict[str, AbstractIncomingMessage] = {}  # receipt -> message, unacked
        self._closed = False
        self.waiting_consumers = 0  # consume calls waiting right now (for tests)

    def queue_name(self, queue: str, lane: str) -> str:
        return f"{self._prefix}.{queue}.{lane}"

    # -- publishing ------------------------------------------------------------------------
    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        if not deliveries:
            return
        try:
            channel = await self._publishing()
            await asyncio.gather(*(self._publish_one(channel, d) for d in deliveries))
        except FAILURES as exc:
            log.warning("RabbitMQ publish of %d dropped: %r", len(deliveries), exc)

    async def _publish_one(self, channel: AbstractRobustChannel, delivery: Delivery) -> None:
        name = self.queue_name(delivery.queue, lane_of(delivery.priority))
        body = aio_pika.Message(
            encode(delivery).encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT
        )
        for _ in range(2):
            if name not in self._declared:
                await channel.declare_queue(name, durable=True, arguments=QUORUM)
                self._declared.add(name)
            try:
                await channel.default_exchange.publish(
                    body, routing_key=name, mandatory=True, timeout=CONFIRM_TIMEOUT
                )
                return
            except aio_pika.exceptions.DeliveryError:  # returned: the queue was deleted
                self._declared.discard(name)
                self._forgot = True  # with whatever it held: the store's queue goes again
        log.warning("RabbitMQ returned %s twice; dropped (the store re-sends it)", name)

    async def publish_at(self, items: Sequence[tuple[Delivery, datetime]]) -> None:
        now = self._clock()
        ready: list[Delivery] = []
        for delivery, at in items:
            if at <= now:
                ready.append(delivery)
            elif (delivery.task_run_id, delivery.attempt) not in self._delayed:
                self._arm(delivery, at)
        await self.publish(ready)

    def _arm(self, delivery: Delivery, at: datetime) -> None:
        delay = max((at - self._clock()).total_seconds(), 0.0)
        key = (delivery.task_run_id, delivery.attempt)
        self._delayed[key] = asyncio.get_running_loop().call_later(delay, self._fire, delivery, at)

    def _fire(self, delivery: Delivery, at: datetime) -> None:
        if self._clock() < at:  # the loop's monotonic timer ran ahead of the wall clock
            self._arm(delivery, at)
            return
        del self._delayed[(delivery.task_run_id, delivery.attempt)]
        self._due.append(delivery)
        if self._mover is None or self._mover.done():
            self._mover = asyncio.get_running_loop().create_task(self._publish_due())

    async def _publish_due(self) -> None:
        # What falls due while a publish waits for its confirms goes out in the next batch:
        # one round of confirms per batch, not per message.
        while self._due:
            due, self._due = self._due, []
            await self.publish(due)

    # -- consuming -------------------------------------------------------------------------
    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        try:
            await self._subscribe(queues)
            if not self._buffered(queues):
                await self._wait(queues, deadline)
            await self._settle(queues, max_items, deadline)
        except FAILURES as exc:
            log.warning("RabbitMQ consume failed: %r", exc)
            await asyncio.sleep(min(max(deadline - time.monotonic(), 0.0), 1.0))
            return []
        return self._take(queues, max_items)

    async def _wait(self, queues: Sequence[str], deadline: float) -> None:
        self.waiting_consumers += 1
        try:
            while not self._buffered(queues) and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), left)
        finally:
            self.waiting_consumers -= 1

    async def _settle(self, queues: Sequence[str], max_items: int, deadline: float) -> None:
        """Wait a moment for messages RabbitMQ holds ready for us but has not pushed yet:
        when we would answer short, or with a lane below one whose buffer is empty."""
        if not self._buffered(queues):
            return
        until = min(time.monotonic() + SETTLE, deadline)
        while (missing := await self._ready_elsewhere(queues, max_items)) and (
            time.monotonic() < until
        ):
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), until - time.monotonic())
            del missing

    async def _ready_elsewhere(self, queues: Sequence[str], max_items: int) -> bool:
        """Whether a queue we should read first (a higher lane with an empty buffer) or
        more (we have fewer than ``max_items``) holds messages that can still come to us."""
        short = self._buffered(queues) < max_items
        best = min(
            (_LANE_RANK[lane] for lane in LANES for q in queues if self._buffer(q, lane)),
            default=len(LANES),
        )
        for lane in LANES:
            state = self._lanes.get(lane)
            if state is None or state.unacked + self._lane_buffered(state) >= self._prefetch:
                continue  # RabbitMQ pushes this lane nothing more until we ack
            if not short and _LANE_RANK[lane] >= best:
                continue
            for queue in queues:
                if self._buffer(queue, lane):
                    continue
                declared = await state.channel.declare_queue(
                    self.queue_name(queue, lane), durable=True, arguments=QUORUM
                )
                if declared.declaration_result.message_count:
                    return True
        return False

    def _take(self, queues: Sequence[str], max_items: int) -> list[Delivery]:
        taken: list[Delivery] = []
        for lane in LANES:
            for queue in queues:
                buffer = self._buffer(queue, lane)
                while buffer and len(taken) < max_items:
                    message = buffer.popleft()
                    delivery = self._delivery(lane, message)
                    if delivery is not None:
                        taken.append(delivery)
        return taken

    def _delivery(self, lane: str, message: AbstractIncomingMessage) -> Delivery | None:
        state = self._lanes[lane]
        self._receipts += 1
        receipt = f"{lane}:{self._receipts}"
        delivery = decode(message.body.decode(errors="replace"), receipt)
        if delivery is None:  # not ours: drop it for good
            log.warning("dropped a malformed RabbitMQ message: %r", message.body[:200])
            self._ack_later(message)
            return None
        state.unacked += 1
        self._inflight[receipt] = message
        return delivery

    def _buffer(self, queue: str, lane: str) -> collections.deque[AbstractIncomingMessage]:
        state = self._lanes.get(lane)
        return state.buffers.setdefault(queue, collections.deque()) if state else _EMPTY

    def _buffered(self, queues: Sequence[str]) -> int:
        return sum(len(self._buffer(q, lane)) for q in queues for lane in LANES)

    @staticmethod
    def _lane_buffered(state: _Lane) -> int:
        return sum(len(b) for b in state.buffers.values())

    async def _subscribe(self, queues: Sequence[str]) -> None:
        await self._connect()
        recheck = time.monotonic() >= self._next_check
        if recheck:
            self._next_check = time.monotonic() + CHECK_CONSUMERS_EVERY
        for lane in LANES:
            state = self._lanes[lane]
            for queue in queues:
                if queue in state.tags and not (recheck and await self._cancelled(state, queue)):
                    continue
                await self._start_consumer(state, queue, lane)

    async def _start_consumer(self, state: _Lane, queue: str, lane: str) -> None:
        declared = await state.channel.declare_queue(
            self.queue_name(queue, lane), durable=True, arguments=QUORUM
        )
        buffer = state.buffers.setdefault(queue, collections.deque())

        async def arrived(message: AbstractIncomingMessage) -> None:
            buffer.append(message)
            self._arrived.set()

        state.queues[queue] = declared
        state.tags[queue] = await declared.consume(arrived, no_ack=False)

    async def _cancelled(self, state: _Lane, queue: str) -> bool:
        """Whether RabbitMQ cancelled our consumer of ``queue`` (its queue was deleted)."""
        underlay: Any = await state.channel.get_underlay_channel()
        if state.tags[queue] in underlay.consumers:
            return False
        log.warning("RabbitMQ cancelled the consumer of %s; consuming again", queue)
        return True

    async def forgot(self) -> bool:
        """``ForgetfulBroker``: True on the first call, and once after a publish found a
        queue deleted (its messages went with it), so the leader re-sends at once."""
        forgot, self._forgot = self._forgot, False
        return forgot

    # -- acks and depths ---------------------------------------------------------------------
    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            message = self._inflight.pop(delivery.receipt or "", None)
            if message is None:
                continue
            state = self._lanes.get(delivery.receipt.split(":")[0] if delivery.receipt else "")
            if state is not None:
                state.unacked = max(state.unacked - 1, 0)
            self._ack_later(message)

    def _ack_later(self, message: AbstractIncomingMessage) -> None:
        """Ack on the channel the message came on (``basic.ack`` has no answer to wait for).
        If that channel has closed since, RabbitMQ has put the message back already."""
        task = asyncio.get_running_loop().create_task(message.ack())
        task.add_done_callback(_log_failure)

    async def depths(self) -> dict[str, int]:
        """Ready messages per queue this broker has used (RabbitMQ lists no queues over
        AMQP), and ``default``: those RabbitMQ holds ready, and those pushed to this process
        that no consume has taken yet (other processes' prefetched ones are not seen)."""
        known = {"default"} | {q for state in self._lanes.values() for q in state.buffers}
        known |= {name.split(".")[-2] for name in self._declared}
        try:
            channel = await self._publishing()
            counts: dict[str, int] = {}
            for queue in sorted(known):
                for lane in LANES:
                    declared = await channel.declare_queue(
                        self.queue_name(queue, lane), durable=True, arguments=QUORUM
                    )
                    count = declared.declaration_result.message_count or 0
                    count += len(self._buffer(queue, lane))
                    counts[queue] = counts.get(queue, 0) + count
            return counts
        except FAILURES as exc:
            raise BrokerUnavailable(f"RabbitMQ unavailable: {exc!r}") from exc

    # -- connection ------------------------------------------------------------------------
    async def _connect(self) -> AbstractRobustConnection:
        async with self._opening:
            if self._connection is None:
                connection = await aio_pika.connect_robust(self._url)
                for lane in LANES:
                    channel: Any = await connection.channel()
                    await channel.set_qos(prefetch_count=self._prefetch)
                    self._lanes[lane] = _Lane(channel)
                self._connection = connection
            return self._connection

    async def _publishing(self) -> AbstractRobustChannel:
        connection = await self._connect()
        if self._publisher is None:
            channel: Any = await connection.channel(publisher_confirms=True, on_return_raises=True)
            self._publisher = channel
        assert self._publisher is not None
        return self._publisher

    async def close(self) -> None:
        self._closed = True
        self._arrived.set()
        for timer in self._delayed.values():
            timer.cancel()
        self._delayed.clear()
        if self._mover is not None:
            self._mover.cancel()
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()
            self._connection = None


_EMPTY: collections.deque[AbstractIncomingMessage] = collections.deque()


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.info("RabbitMQ ack dropped (its channel closed): %r", task.exception())
