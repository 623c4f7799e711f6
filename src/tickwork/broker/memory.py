"""An in-process broker for embedded mode: priority lanes over asyncio, per queue."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from tickwork.ports import Delivery, TaskKey


def _utcnow() -> datetime:
    return datetime.now(UTC)


#: A consumer of this name takes every queue (``tickwork up`` without ``--queues``).
EVERY_QUEUE = "*"


class MemoryBroker:
    """Deliveries held in one heap per queue: higher priority first, FIFO among equals.

    Consumers wait on a condition, so a publish wakes them at once (no polling delay).
    Delayed deliveries wait on the event loop's timers. A restart loses everything; the
    scheduler re-publishes what the store says is queued. There is one process, so no
    consumer can die while others live: ``ack`` has nothing to do.
    """

    def __init__(self, clock: Callable[[], datetime] = _utcnow) -> None:
        self._heaps: dict[str, list[tuple[int, int, Delivery]]] = {}
        self._seq = itertools.count()
        self._ready = asyncio.Condition()
        self._closed = False
        self._clock = clock
        self._delayed: dict[TaskKey, asyncio.TimerHandle] = {}
        self._due: list[Delivery] = []
        self._mover: asyncio.Task[None] | None = None
        self.waiting_consumers = 0  # consume calls blocked right now (for tests and status)

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        if not deliveries:
            return
        async with self._ready:
            for d in deliveries:
                heap = self._heaps.setdefault(d.queue, [])
                heapq.heappush(heap, (-d.priority, next(self._seq), d))
            self._ready.notify_all()

    async def publish_at(self, items: Sequence[tuple[Delivery, datetime]]) -> None:
        now = self._clock()
        ready: list[Delivery] = []
        for delivery, at in items:
            if at <= now:
                ready.append(delivery)
            elif (delivery.task_run_id, delivery.attempt) not in self._delayed:
                self._arm(delivery, at)
        await self.publish(ready)

    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        async with self._ready:
            if not self._any_ready(queues) and not self._closed:
                self.waiting_consumers += 1
                try:
                    await asyncio.wait_for(
                        self._ready.wait_for(lambda: self._closed or self._any_ready(queues)),
                        timeout,
                    )
                except TimeoutError:
                    return []
                finally:
                    self.waiting_consumers -= 1
            return self._take(queues, max_items)

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        return None

    async def depths(self) -> dict[str, int]:
        return {queue: len(heap) for queue, heap in self._heaps.items()}

    async def close(self) -> None:
        for timer in self._delayed.values():
            timer.cancel()
        self._delayed.clear()
        async with self._ready:
            self._closed = True
            self._ready.notify_all()

    def _names(self, queues: Sequence[str]) -> Sequence[str]:
        return list(self._heaps) if EVERY_QUEUE in queues else queues

    def _any_ready(self, queues: Sequence[str]) -> bool:
        return any(self._heaps.get(q) for q in self._names(queues))

    def _take(self, queues: Sequence[str], max_items: int) -> list[Delivery]:
        taken: list[Delivery] = []
        names = self._names(queues)
        while len(taken) < max_items:
            ready = [(h[0][:2], q) for q in names if (h := self._heaps.get(q))]
            if not ready:
                break
            _, queue = min(ready)
            taken.append(heapq.heappop(self._heaps[queue])[2])
        return taken

    # -- delayed delivery ----------------------------------------------------------------
    def _arm(self, delivery: Delivery, at: datetime) -> None:
        delay = (at - self._clock()).total_seconds()
        key = (delivery.task_run_id, delivery.attempt)
        self._delayed[key] = asyncio.get_running_loop().call_later(
            max(delay, 0.0), self._fire, delivery, at
        )

    def _fire(self, delivery: Delivery, at: datetime) -> None:
        if self._clock() < at:  # the loop's monotonic timer ran ahead of the wall clock
            self._arm(delivery, at)
            return
        del self._delayed[(delivery.task_run_id, delivery.attempt)]
        self._due.append(delivery)
        if self._mover is None or self._mover.done():
            self._mover = asyncio.get_running_loop().create_task(self._publish_due())

    async def _publish_due(self) -> None:
        # Everything that falls due while a publish is in flight goes out in the next batch.
        while self._due:
            due, self._due = self._due, []
            await self.publish(due)
