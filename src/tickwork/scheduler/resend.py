"""Re-sending queued task runs that no worker claimed: lost messages, restarts, a broker that
lost its data.

The store is the record and a broker message only a hint, so the scheduler re-publishes a
task run that sits ``queued`` and unclaimed too long. Without care that multiplies messages
while no worker is up (every pass re-sent every such run: 500 runs became 3,500 stream
entries in 42 s). So each task run is re-sent at most once per backoff period (``first``
seconds, doubling to ``cap``), and a queue whose broker already holds as many unread
messages as it has unclaimed task runs is left alone: its messages are there, waiting for a
worker. Redis thus holds about one message per queued task run, plus the few re-sent ones.

A broker that can tell it lost everything (``ForgetfulBroker``: Redis after FLUSHALL or an
empty restart) is asked on every pass; then everything queued is re-sent at once, ahead work
included, instead of after the backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from tickwork.core.model import TaskRun
from tickwork.ports import (
    Broker,
    BrokerUnavailable,
    Delivery,
    DispatchStore,
    ForgetfulBroker,
    TaskKey,
)

log = logging.getLogger("tickwork.scheduler")

FORGOT_EVERY = 0.5  # seconds between two checks of the broker's epoch marker


class Resender:
    def __init__(
        self,
        store: DispatchStore,
        broker: Broker,
        clock: Callable[[], datetime],
        *,
        first: float = 30.0,
        cap: float = 600.0,
        limit: int = 5000,
    ) -> None:
        self._store = store
        self._broker = broker
        self._clock = clock
        self._first = first
        self._cap = cap
        self._limit = limit
        self._next: dict[TaskKey, tuple[datetime, float]] = {}  # key -> (not before, period)
        self._asked: datetime | None = None

    async def broker_forgot(self, now: datetime) -> bool:
        """Whether the broker lost its messages since we last asked (never for one that
        cannot tell). Asks at most every ``FORGOT_EVERY`` seconds (one Redis round trip)."""
        broker = self._broker
        if not isinstance(broker, ForgetfulBroker):
            return False
        if self._asked is not None and (now - self._asked).total_seconds() < FORGOT_EVERY:
            return False
        self._asked = now
        return await broker.forgot()

    async def resend_all(self, queued_before: datetime) -> int:
        """Re-send every queued task run up to ``queued_before`` (start, failover, a broker
        that lost its data), ahead ones for their instants; the backoff starts over."""
        self._next.clear()
        lost = await self._store.queued_task_runs(queued_before, self._limit)
        await self._publish(lost, self._clock())
        return len(lost)

    async def resend_stale(self, now: datetime) -> int:
        """Re-send task runs queued and unclaimed for ``first`` seconds, each at most once
        per its backoff period, skipping queues whose messages are still waiting unread.
        The counts per queue come first: under a backlog whose messages all wait (a busy
        `tickwork up`), reading and decoding ``limit`` rows every pass cost the process the
        GIL for nothing (bench/README.md, "Session 16: embedded W1")."""
        before = now - timedelta(seconds=self._first)
        waiting = await self._waiting()
        if waiting is not None:  # every queue's messages there: no row needs reading
            counts = await self._store.queued_counts(before, self._limit)
            if all(waiting.get(queue, 0) >= n for queue, n in counts.items()):
                return 0
        lost = await self._store.queued_task_runs(before, self._limit)
        by_queue: dict[str, int] = {}
        for tr in lost:
            by_queue[tr.queue] = by_queue.get(tr.queue, 0) + 1
        keys = {(tr.id, tr.attempt) for tr in lost}
        for key in [k for k in self._next if k not in keys]:  # claimed since: forget them
            del self._next[key]
        due: list[TaskRun] = []
        for tr in lost:
            if waiting is not None and waiting.get(tr.queue, 0) >= by_queue[tr.queue]:
                continue  # as many messages wait unread as runs: nothing is missing
            key = (tr.id, tr.attempt)
            not_before, period = self._next.get(key, (now, self._first / 2))
            if now < not_before:
                continue
            period = min(period * 2, self._cap)
            self._next[key] = (now + timedelta(seconds=period), period)
            due.append(tr)
        await self._publish(due, now)
        return len(due)

    async def _waiting(self) -> dict[str, int] | None:
        try:
            return await self._broker.depths()
        except BrokerUnavailable:
            return None

    async def _publish(self, task_runs: Sequence[TaskRun], now: datetime) -> None:
        claimable: list[Delivery] = []
        ahead: list[tuple[Delivery, datetime]] = []
        for tr in task_runs:
            d = Delivery(tr.id, tr.attempt, tr.queue, tr.priority)
            if tr.queued_at is not None and tr.queued_at > now:
                ahead.append((d, tr.queued_at))
            else:
                claimable.append(d)
        await self._broker.publish(claimable)
        if ahead:
            await self._broker.publish_at(ahead)
