"""Cancel signals inside one process (embedded mode)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence

from tickwork.ports import TaskKey

_CLOSED: list[TaskKey] = []  # identity sentinel: a listener's queue gets it on ``close``


class MemoryCancelSignals:
    """Each listener has its own queue; ``request`` puts the keys on every one at once.

    Requested keys are remembered for ``ttl`` seconds for listeners that start late.
    """

    def __init__(self, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._requested: dict[TaskKey, float] = {}  # key -> when it is forgotten
        self._listeners: set[asyncio.Queue[list[TaskKey]]] = set()

    async def request(self, keys: Sequence[TaskKey]) -> None:
        if not keys:
            return
        now = self._clock()
        self._requested = {k: t for k, t in self._requested.items() if t > now}
        self._requested.update((key, now + self._ttl) for key in keys)
        for queue in self._listeners:
            queue.put_nowait(list(keys))

    async def listen(
        self, watching: Callable[[], Collection[TaskKey]]
    ) -> AsyncIterator[list[TaskKey]]:
        queue: asyncio.Queue[list[TaskKey]] = asyncio.Queue()
        self._listeners.add(queue)
        try:
            now = self._clock()
            early = [k for k in watching() if self._requested.get(k, now) > now]
            if early:
                yield early
            while (keys := await queue.get()) is not _CLOSED:
                yield keys
        finally:
            self._listeners.discard(queue)

    async def close(self) -> None:
        for queue in self._listeners:
            queue.put_nowait(_CLOSED)
