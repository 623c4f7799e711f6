"""A uvicorn server that leaves the process to us after SIGINT / SIGTERM.

uvicorn catches the signal, stops serving, and then raises it again once ``serve`` returns, so
that the process dies of it. Under ``asyncio.run`` that re-raised SIGINT cancels the main task
at once: `tickwork up` exited in 0.2 s without draining its running tasks. This server keeps
its own handlers for as long as the ``stopping`` block of the caller runs: the first signal
stops serving (and the caller drains), a second one ends the process at once.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Generator
from types import FrameType

import uvicorn

log = logging.getLogger("tickwork")

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class DrainingServer(uvicorn.Server):
    """``uvicorn.Server`` whose first SIGINT / SIGTERM only sets ``should_exit`` (and calls
    ``on_stop``), and whose second one ends the process with the default action."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[int], None]) -> None:
        super().__init__(config)
        self._on_stop = on_stop
        self._previous: dict[int, object] = {}

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # Installed by ``handling_signals`` around serve *and* the drain after it; uvicorn's
        # own capture (and its re-raise) is switched off.
        yield

    @contextlib.contextmanager
    def handling_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._previous = {sig: signal.signal(sig, self._handle) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]

    def _handle(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            log.warning("%s again: stopping at once", signal.Signals(sig).name)
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)
            return
        self.should_exit = True
        for other in _SIGNALS:  # the next one of either kind ends the process
            signal.signal(other, self._handle)
        self._on_stop(sig)
