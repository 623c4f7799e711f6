"""Cancel signals that arrived before the claim they concern returned."""

from __future__ import annotations

import time
from collections.abc import Callable

from tickwork.ports import TaskKey

EARLY_CANCEL_MEMORY = 10.0  # seconds a cancel signal for an attempt not (yet) held is kept


class EarlyCancels:
    """A signal can beat the reply of the claim it concerns: keep it a little while, so the
    claim's task run starts cancelled. Signals are broadcast, so most of these are for other
    workers: they age out after ``EARLY_CANCEL_MEMORY`` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[TaskKey, float] = {}  # in age order, oldest first

    def remember(self, key: TaskKey) -> None:
        now = self._clock()
        while self._seen:
            oldest = next(iter(self._seen))
            if now - self._seen[oldest] < EARLY_CANCEL_MEMORY:
                break
            del self._seen[oldest]
        self._seen.pop(key, None)  # re-inserted at the end: the dict stays in age order
        self._seen[key] = now

    def take(self, key: TaskKey) -> bool:
        """Whether a cancel for ``key`` came early (and forget it)."""
        return self._seen.pop(key, None) is not None
