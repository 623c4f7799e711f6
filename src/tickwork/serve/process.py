"""A tickwork process: what it opened, its named loops, and how it stops on a signal.

A ``Process`` closes the parts it opened with one exit stack (in the reverse order they were
opened), runs its named loops under the supervisor (one that crashes or ends stops the
process), and runs its stop steps in order on the first SIGINT/SIGTERM while the loops still
run. ``run_process`` runs one: logging, tracing, garbage collection tuning, signals, then
``build(process)`` and the loops. The builders of each kind of process are in ``wiring.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from tickwork.app.settings import Settings
from tickwork.core.errors import TickworkError
from tickwork.observe import tracing
from tickwork.observe.logs import configure_logging
from tickwork.runtime.supervisor import supervise
from tickwork.serve.tuning import tune_gc
from tickwork.store.engine import name_sessions

log = logging.getLogger("tickwork")

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class LoopEnded(TickworkError):
    """A process loop returned although nobody asked the process to stop."""


@dataclass
class Process:
    """One process being built: what it opened, what it runs, and how it stops."""

    settings: Settings
    stack: contextlib.AsyncExitStack
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    #: What the process says when a signal stops it (after the signal's name).
    stop_message: Callable[[], str] = lambda: "stopping (again to stop at once)"
    stopped_by: str = "stop"  # the signal's name, once one came
    #: The running loops' tasks (filled as they start): what liveness probes look at.
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _loops: dict[str, Coroutine[Any, Any, None]] = field(default_factory=dict)
    _stop_steps: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def loop(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` under the supervisor, named ``name`` in logs and crash reports."""
        self._loops[name] = coro

    def on_stop(self, step: Callable[[], Awaitable[None]], *, first: bool = False) -> None:
        """Run ``step`` when the process is asked to stop, after the steps added before it
        (``first``: before them)."""
        self._stop_steps.insert(0 if first else len(self._stop_steps), step)

    def on_close(self, close: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Call ``close(*args)`` at exit, before whatever was registered earlier is closed."""
        self.stack.push_async_callback(close, *args)

    async def run(self) -> None:
        """Run the loops until ``stop`` is set (then the stop steps) or one of them fails."""
        loops = {name: self._guard(name, coro) for name, coro in self._loops.items()}
        await supervise({**loops, "stop": self._stopping()})

    def discard(self) -> None:
        """Close the loops that will not run (the build failed after adding them)."""
        for coro in self._loops.values():
            coro.close()
        self._loops.clear()

    async def _stopping(self) -> None:
        await self.stop.wait()
        log.info("%s: %s", self.stopped_by, self.stop_message())
        for step in self._stop_steps:
            await step()

    async def _guard(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.append(task)
        await coro
        if not self.stop.is_set():
            raise LoopEnded(f"{name} stopped unexpectedly; shutting down")
        await asyncio.Event().wait()  # stopping: the stop steps decide when all is done


def run_process(
    settings: Settings, build: Callable[[Process], Awaitable[None]], kind: str | None = None
) -> None:
    """Blocking entry point of every process: ``build`` it, run it until SIGINT/SIGTERM.
    ``kind`` (default: ``build``'s name without ``build_``) names the process kind in traces
    (``tickwork-<kind>``) and in PostgreSQL's ``pg_stat_activity`` (``application_name``).

    The first signal runs the stop steps; a second one ends the process at once."""
    kind = kind or build.__name__.removeprefix("build_")
    configure_logging(settings.log_format)  # alembic's line per migration is quiet too
    name_sessions(kind)
    tracing.configure(kind)  # OTEL_*; off by default
    tune_gc()  # the server stack is imported by now: its objects are frozen out of collections
    try:
        asyncio.run(serve(settings, build))
    finally:
        tracing.shutdown()  # export the spans still buffered


async def serve(settings: Settings, build: Callable[[Process], Awaitable[None]]) -> None:
    """Build the process and run it; everything it opened is closed when this returns."""
    async with contextlib.AsyncExitStack() as stack:
        process = Process(settings, stack)
        _handle_signals(process)
        stack.callback(_restore_signals)
        try:
            await build(process)
        except BaseException:
            process.discard()
            raise
        await process.run()


def _handle_signals(process: Process) -> None:
    loop = asyncio.get_running_loop()

    def handle(sig: signal.Signals) -> None:
        if not process.stop.is_set():
            process.stopped_by = sig.name
            process.stop.set()
            return
        log.warning("%s again: stopping at once", sig.name)
        _restore_signals()
        signal.raise_signal(sig)

    for sig in _SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(sig, handle, sig)


def _restore_signals() -> None:
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop = asyncio.get_running_loop()
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
