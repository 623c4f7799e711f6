"""An in-process broker for embedded mode: priority lanes over asyncio, per queue."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Sequence

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

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        if not deliveries:
            return
        async with self._ready:
            for d in deliveries:
                heap = self._heaps.setdefault(d.queue, [])
                heapq.heappush(heap, (-d.priority, next(self._seq), d))
            self._ready.notify_all()

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
