"""The broker and cancel-signal ports: delivery of task-run keys to workers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from tickwork.core.errors import TickworkError
from tickwork.ports.records import TaskKey


@dataclass(frozen=True, slots=True)
class Delivery:
    """A broker message: ids and the attempt only. Never enough to run anything by itself.

    ``receipt`` is the broker's id of the message as consumed (``None`` when publishing, and
    for a broker without one); ``ack`` needs it. It takes no part in equality.
    """

    task_run_id: str
    attempt: int
    queue: str = "default"
    priority: int = 0
    receipt: str | None = field(default=None, compare=False)


class Broker(Protocol):
    """Delivers task-run keys to workers. A speed-up only: the store is the record.

    Delivery is at least once: a message may arrive twice or late, and one may be lost
    (a Redis restart); the worker's conditional claim decides, and the scheduler re-sends
    what the store says is queued. So a broker that cannot reach its server logs and drops
    what it was given to publish or ack, and ``consume`` returns nothing until it can
    again; only ``depths`` raises (``BrokerUnavailable``).
    """

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        """Deliver now, in order: higher priority first; equal priority first in, first out."""

    async def publish_at(self, items: Sequence[tuple[Delivery, datetime]]) -> None:
        """Deliver each at its aware-UTC instant, never before; a past instant delivers now.

        A (task_run_id, attempt) published again while it still waits is delivered once,
        at the instant it was first given.
        """

    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        """Up to ``max_items`` deliveries, higher priority first; waits up to ``timeout`` s.

        A delivery stays this consumer's until acked; one a dead consumer never acked is
        delivered again to another (after a broker-specific idle time).
        """

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        """Forget consumed deliveries, once what they led to is durably written (the claim
        that lost, or the completion of the attempt that ran)."""

    async def depths(self) -> dict[str, int]:
        """Messages ready and not yet handed to a consumer, per queue (delayed ones not
        counted). For ``tickwork status``."""

    async def close(self) -> None: ...


@runtime_checkable
class ForgetfulBroker(Protocol):
    """A broker whose server can lose every message at once (Redis after FLUSHALL or an
    empty restart) and can tell: the scheduler then re-sends the store's queue at once."""

    async def forgot(self) -> bool:
        """True once after the server lost its data (and on the first call)."""


@runtime_checkable
class SendsAhead(Protocol):
    """A broker that can hand a publish to its server without waiting for the reply.

    For the API's single enqueues: the runs are durable at the commit, so the caller can be
    answered in the loop turn that wrote the publish, and the server's reply read later. A
    publish that fails after that (the connection lost, a command refused) is logged, and the
    scheduler's ``Resender`` re-sends the runs it left queued, as for any lost message.
    """

    async def send_ahead(self, deliveries: Sequence[Delivery]) -> None:
        """Write ``deliveries`` as ``publish`` would and return once written (waiting only to
        connect, when no connection is open); never raises for the server's answer."""


class BrokerUnavailable(TickworkError):
    """The broker's server cannot be reached (raised by ``Broker.depths`` only)."""


class CancelSignals(Protocol):
    """Tells workers at once that the cancellation of a running attempt was requested.

    A speed-up only: the store's ``cancel_requested`` flag, which a worker's heartbeat
    reads, stays the record, so a signal lost to a broken connection delays a cancel by
    one heartbeat and no more.
    """

    async def request(self, keys: Sequence[TaskKey]) -> None:
        """Signal every listener now, and remember each key for a while, so that a listener
        that subscribes (or reconnects) later still sees it. Never raises for a lost
        connection (it logs)."""

    def listen(self, watching: Callable[[], Collection[TaskKey]]) -> AsyncIterator[list[TaskKey]]:
        """Yield requested keys as requests arrive, until the iteration is closed.

        On subscribing, and again after every reconnect, first yield the keys among
        ``watching()`` that were requested before (a late subscriber still sees them).
        Keys of attempts the listener does not run are passed on too; it ignores them.
        """

    async def close(self) -> None: ...
