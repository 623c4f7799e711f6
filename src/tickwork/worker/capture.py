"""Per-task capture of ``print()`` and ``sys.stdout`` / ``sys.stderr`` writes.

Python tasks run inside the worker process, many at once: async ones interleaved in one event
loop and sync ones in threads. Swapping ``sys.stdout`` per task would mix their output, so a
proxy is installed once as ``sys.stdout`` / ``sys.stderr``. It looks up the sink of the task
that is writing in a :class:`contextvars.ContextVar`: an asyncio task runs in the context it
was created with, and a thread runs what ``Context.run`` (or ``asyncio.to_thread``) hands it
in the caller's context, so each write lands in the sink of the task that made it. Writes
made outside any task go to the original stream.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar, Token
from typing import Any, TextIO, cast

from tickwork.ports import LogSink

_current_sink: ContextVar[LogSink | None] = ContextVar("tickwork_log_sink", default=None)


class _StreamProxy:
    """Stands in for ``sys.stdout`` or ``sys.stderr``; routes writes by context."""

    def __init__(self, stream: str, original: TextIO) -> None:
        self._stream = stream
        self.original = original

    def write(self, data: str) -> int:
        sink = _current_sink.get()
        if sink is None:
            return self.original.write(data)
        sink.write(self._stream, data)
        return len(data)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _current_sink.get() is None:
            self.original.flush()

    def isatty(self) -> bool:
        # A task's output goes to a log, never to a terminal.
        return _current_sink.get() is None and self.original.isatty()

    def __getattr__(self, name: str) -> Any:
        # encoding, errors, fileno, buffer...: whatever the original stream offers.
        return getattr(self.original, name)


def install() -> None:
    """Install the proxies as ``sys.stdout`` and ``sys.stderr``. Calling it again is a no-op."""
    if not isinstance(sys.stdout, _StreamProxy):
        sys.stdout = cast(TextIO, _StreamProxy("stdout", sys.stdout))
    if not isinstance(sys.stderr, _StreamProxy):
        sys.stderr = cast(TextIO, _StreamProxy("stderr", sys.stderr))


def uninstall() -> None:
    """Put the original streams back. Calling it when nothing is installed is a no-op."""
    if isinstance(sys.stdout, _StreamProxy):
        sys.stdout = sys.stdout.original
    if isinstance(sys.stderr, _StreamProxy):
        sys.stderr = sys.stderr.original


def is_installed() -> bool:
    return isinstance(sys.stdout, _StreamProxy) and isinstance(sys.stderr, _StreamProxy)


def bind(sink: LogSink | None) -> Token[LogSink | None]:
    """Make ``sink`` the destination of this context's output; undo with :func:`unbind`.

    Tasks and threads started afterwards from this context inherit the binding.
    """
    return _current_sink.set(sink)


def unbind(token: Token[LogSink | None]) -> None:
    _current_sink.reset(token)


def current_sink() -> LogSink | None:
    """The sink this context's output goes to, or None outside a task."""
    return _current_sink.get()


@contextmanager
def capturing(sink: LogSink) -> Iterator[LogSink]:
    """Route this context's ``print()`` output to ``sink`` for the duration of the block."""
    token = bind(sink)
    try:
        yield sink
    finally:
        unbind(token)


class LineBufferedSink:
    """Joins small writes into whole lines before they reach ``sink``.

    ``print("x")`` writes ``"x"`` and ``"\\n"`` separately; stored as they come, every print
    would cost two log chunks. Text is passed on up to its last newline, or once more than
    ``max_pending`` characters wait. Call :meth:`close` at the end of the attempt to pass on
    the rest; writes after that go straight through. Not thread-safe: wrap it in a
    :class:`LoopSink` for writers in other threads.
    """

    def __init__(self, sink: LogSink, max_pending: int = 64 * 1024) -> None:
        self._sink = sink
        self._max_pending = max_pending
        self._pending: dict[str, str] = {}
        self._closed = False

    def write(self, stream: str, data: str) -> None:
        if self._closed:
            self._sink.write(stream, data)
            return
        text = self._pending.pop(stream, "") + data
        cut = len(text) if len(text) > self._max_pending else text.rfind("\n") + 1
        if cut:
            self._sink.write(stream, text[:cut])
        if cut < len(text):
            self._pending[stream] = text[cut:]

    def close(self) -> None:
        self._closed = True
        for stream, text in self._pending.items():
            self._sink.write(stream, text)
        self._pending.clear()


class LoopSink:
    """Hands writes made in other threads to ``sink`` on the event loop's thread.

    Sinks belong to the loop (the worker's buffers are not thread-safe). Writes keep their
    order, and a write made before a thread's function returns reaches the sink before the
    loop learns that it returned, because both travel through ``call_soon_threadsafe``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: LogSink) -> None:
        self._loop = loop
        self._sink = sink

    def write(self, stream: str, data: str) -> None:
        # RuntimeError: the loop is closed, an abandoned thread outlived the worker.
        with suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._sink.write, stream, data)
