"""An in-process broker for embedded mode: priority lanes over asyncio, per queue."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime

from tickwork.ports import Delivery


class MemoryBroker:
    """Deliveries held in one heap per queue: higher priority first, FIFO among equals.

    Consumers wait on a condition, so a publish wakes them at once (no polling delay).
    A restart loses the heap; the scheduler re-publishes what the store says is queued.
    """

    def __init__(self) -> None:
        self._heaps: dict[str, list[tuple[int, int, Delivery]]] = {}
        self._seq = itertools.count()
        self._ready = asyncio.Condition()
        self._closed = False
        self._delayed: dict[tuple[str, int], asyncio.Task[None]] = {}

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        if not deliveries:
            return
        async with self._ready:
            for d in deliveries:
                heap = self._heaps.setdefault(d.queue, [])
                heapq.heappush(heap, (-d.priority, next(self._seq), d))
            self._ready.notify_all()

    async def publish_at(self, items: Sequence[tuple[Delivery, datetime]]) -> None:
        # TEMP stub: the broker work adds the real delayed delivery to this broker.
        now = datetime.now(UTC)
        await self.publish([d for d, at in items if at <= now])
        for d, at in items:
            key = (d.task_run_id, d.attempt)
            if at > now and key not in self._delayed:
                self._delayed[key] = asyncio.create_task(
                    self._deliver_later(d, (at - now).total_seconds())
                )

    async def _deliver_later(self, delivery: Delivery, delay: float) -> None:
        await asyncio.sleep(delay)
        del self._delayed[(delivery.task_run_id, delivery.attempt)]
        await self.publish([delivery])

    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        async with self._ready:
            if not self._any_ready(queues) and not self._closed:
                try:
                    await asyncio.wait_for(
                        self._ready.wait_for(lambda: self._closed or self._any_ready(queues)),
                        timeout,
                    )
                except TimeoutError:
                    return []
            return self._take(queues, max_items)

    def depth(self, queue: str) -> int:
        return len(self._heaps.get(queue, ()))

    async def close(self) -> None:
        for task in self._delayed.values():
            task.cancel()
        async with self._ready:
            self._closed = True
            self._ready.notify_all()

    def _any_ready(self, queues: Sequence[str]) -> bool:
        return any(self._heaps.get(q) for q in queues)

    def _take(self, queues: Sequence[str], max_items: int) -> list[Delivery]:
        taken: list[Delivery] = []
        while len(taken) < max_items:
            ready = [(h[0][:2], q) for q in queues if (h := self._heaps.get(q))]
            if not ready:
                break
            _, queue = min(ready)
            taken.append(heapq.heappop(self._heaps[queue])[2])
        return taken
