"""``Slots``: a semaphore whose size can change while tasks hold it (worker autoscaling).

Growing lets waiters in at once; shrinking takes effect as holders leave: nothing running
is interrupted, no new holder enters until fewer than the new limit hold a slot. Waiters
enter in arrival order. As cheap as ``asyncio.Semaphore`` (bench/slot_gate.py): a leaving
holder hands its slot straight to the next waiter's future.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from types import TracebackType


class Slots:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> None:
        if self.used < self.limit and not self._waiters:
            self.used += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # whoever completes it has counted our slot in ``used``
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a slot as we were cancelled
                self.used -= 1
                self._wake()
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.used -= 1
        self._wake()

    def resize(self, limit: int) -> None:
        self.limit = limit
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.used < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.used += 1
                waiter.set_result(None)
