"""What a worker pool's fetch loop has in flight: a consume, and claims running beside it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any


class InFlight:
    """The fetch loop's consume and its claims in flight. A claim runs in a task of its own
    (up to ``limit`` at once), so that the loop reads again while it commits; ``idle`` is set
    while neither a consume nor a claim is in flight. A claim that raised (outages are
    retried inside it, so a bug) raises again in the fetch loop (``raise_failed``)."""

    def __init__(self, limit: int, on_claimed: Callable[[], None]) -> None:
        self.idle = asyncio.Event()
        self.idle.set()
        self.claiming = 0  # deliveries in the claims in flight
        self._limit = max(1, limit)
        self._on_claimed = on_claimed  # after each claim (what it won is counted elsewhere)
        self._consuming = False
        self._claims: set[asyncio.Task[None]] = set()
        self._failed: asyncio.Task[None] | None = None

    @property
    def claims(self) -> int:
        return len(self._claims)

    @contextlib.contextmanager
    def consuming(self) -> Iterator[None]:
        self._consuming = True
        self.idle.clear()
        try:
            yield
        finally:
            self._consuming = False
            self._idle_unless_busy()

    async def claim(self, claiming: Coroutine[Any, Any, None], count: int) -> None:
        """Run ``claiming`` (of ``count`` deliveries) in a task and return, unless ``limit``
        claims are in flight then: it waits for one of them to end first."""
        if self._failed is not None:
            claiming.close()
            self.raise_failed()
        task = asyncio.create_task(claiming, name="worker.claim")
        self.claiming += count
        self._claims.add(task)
        self.idle.clear()
        task.add_done_callback(lambda done: self._ended(done, count))
        # The claim's statement goes out first: the loop's next read (a redis-py command,
        # ~0.1-0.2 ms of CPU) would otherwise be sent before it.
        await asyncio.sleep(0)
        if len(self._claims) >= self._limit:
            await asyncio.wait(set(self._claims), return_when=asyncio.FIRST_COMPLETED)
            self.raise_failed()

    def raise_failed(self) -> None:
        if (failed := self._failed) is not None:
            self._failed = None
            failed.result()

    async def settled(self, timeout: float) -> None:
        """Once the claims in flight have ended (at most ``timeout`` seconds)."""
        if self._claims:
            await asyncio.wait(set(self._claims), timeout=timeout)

    def cancel(self) -> None:
        for task in self._claims:
            task.cancel()

    def _ended(self, task: asyncio.Task[None], count: int) -> None:
        self._claims.discard(task)
        self.claiming -= count
        if not task.cancelled() and task.exception() is not None and self._failed is None:
            self._failed = task
        self._idle_unless_busy()
        self._on_claimed()

    def _idle_unless_busy(self) -> None:
        if not self._consuming and not self._claims:
            self.idle.set()
