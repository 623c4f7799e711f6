"""An attempt's cancel request, as the worker pool hands it to a runner."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class CancelSignal(asyncio.Event):
    """An ``asyncio.Event`` that also calls back when set.

    A runner waits for its work, its timeout and this at once; with a callback that costs a
    future and a timer, where waiting on ``Event.wait()`` needs a task per attempt (created,
    stepped, cancelled: a visible share of a no-op task's cost in the worker).
    """

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once this is set (at once if it is)."""
        if self.is_set():
            callback()
        else:
            self._callbacks.append(callback)

    def discard(self, callback: Callable[[], None]) -> None:
        """Forget ``callback`` (the wait it served is over)."""
        with contextlib.suppress(ValueError):
            self._callbacks.remove(callback)
