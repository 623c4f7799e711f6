"""A task process of the python runner: runs python tasks one at a time, on request.

The worker starts it with ``python -m tickwork.worker.child``; stdin brings requests, stdout
takes replies, both as frames (a 4-byte length, then JSON). Everything the task prints through
``sys.stdout`` / ``sys.stderr`` travels as frames too, in order with the reply, so the worker
has all of an attempt's output when it learns the attempt ended. File descriptors 1 and 2 are
the worker's stderr (what C code or a subprocess writes there is not captured, as before).

The process is expendable: the worker kills its whole process group when an attempt times
out or is cancelled (SIGTERM, then SIGKILL), and starts another. It dies with the worker
(PR_SET_PDEATHSIG on Linux), and exits when its stdin closes. Standard library only, plus the
target importer: it must start fast and hold little.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import IO, Any

from tickwork import taskcontext
from tickwork.runtime.targets import TargetError, import_from_cwd, resolve_target
from tickwork.worker import tasksup

HEADER = struct.Struct(">I")
FLUSH_AT = 64 * 1024  # characters of output buffered before a frame is sent without a newline
_PLUMBING = ("asyncio", "tickwork.worker", "tickwork.runtime")


class Interrupted(BaseException):
    """SIGTERM: the attempt was stopped; ``finally`` blocks get their short grace."""


def read_frame(stream: IO[bytes]) -> Any:
    head = _read_exactly(stream, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    body = _read_exactly(stream, size)
    return None if body is None else json.loads(body)


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        part = stream.read(size - len(data))
        if not part:
            return None
        data += part
    return data


def encode_frame(message: Any) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


class _Channel:
    """The reply pipe, shared by the task's output and the replies (threads may print)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: Any) -> None:
        data = encode_frame(message)
        with self._lock:
            self._stream.write(data)


class _Output:
    """``sys.stdout`` / ``sys.stderr`` of the task: text goes to the worker in frames."""

    def __init__(self, stream: str, channel: _Channel) -> None:
        self._stream = stream
        self._channel = channel
        self._pending: list[str] = []
        self._size = 0
        self.encoding = "utf-8"
        self.errors = "replace"

    def write(self, data: str) -> int:
        if not isinstance(data, str):
            raise TypeError(f"write() argument must be str, not {type(data).__name__}")
        self._pending.append(data)
        self._size += len(data)
        if "\n" in data or self._size >= FLUSH_AT:
            self.flush()
        return len(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            text, self._pending, self._size = "".join(self._pending), [], 0
            self._channel.send({"o": self._stream, "d": text})

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return 2


def _die_with_parent(parent: int) -> None:
    """Linux: when the worker dies (even by kill -9), kill what the running task started
    and exit (the parent-death signal, handled as in tasksup)."""
    signal.signal(signal.SIGUSR2, tasksup.worker_died)
    tasksup.prctl(tasksup.PR_SET_PDEATHSIG, signal.SIGUSR2)
    if os.getppid() != parent:  # the worker died before the call above took effect
        os._exit(1)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted()


def _enter_trace(traceparent: str | None) -> Callable[[], None] | None:
    """Make the attempt's span (W3C ``traceparent``) the current OpenTelemetry context, so
    the task's own spans are its children; returns how to leave it. Without OpenTelemetry
    installed there is nothing to join."""
    if not traceparent:
        return None
    try:
        from opentelemetry import context, propagate
    except ImportError:
        return None
    token = context.attach(propagate.extract({"traceparent": traceparent}))
    return lambda: context.detach(token)


class _Runner:
    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        self._loop = asyncio.new_event_loop()
        self._targets: dict[str, Callable[..., Any]] = {}
        self._out = _Output("stdout", channel)
        self._err = _Output("stderr", channel)

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        ctx = taskcontext.TaskContext.from_json(request["ctx"])
        token = taskcontext.enter(ctx)
        # What the task starts inherits these, as a shell task's processes do: the worker
        # finds them by these even if they leave the process group (worker/tree.py). Made
        # here from the context, not sent beside it (half the request's JSON, per attempt).
        os.environ.update(ctx.env())
        traced = _enter_trace(request.get("traceparent"))
        try:
            return self._call(request["target"], request["kwargs"])
        finally:
            if traced is not None:
                traced()
            taskcontext.leave(token)
            self._out.flush()
            self._err.flush()

    def _call(self, target: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            function = self._targets.get(target) or self._load(target)
        except TargetError as exc:
            return {"ok": False, "error": str(exc)}
        try:
            if inspect.iscoroutinefunction(function):
                value = self._loop.run_until_complete(function(**kwargs))
            else:
                value = function(**kwargs)
        except Exception as exc:
            return self._failure(exc)
        try:
            return {"ok": True, "result": None if value is None else json.dumps(value)}
        except (TypeError, ValueError):
            return {"ok": True, "nonjson": type(value).__name__}

    def _load(self, target: str) -> Callable[..., Any]:
        function = resolve_target(target)
        self._targets[target] = function
        return function

    def _failure(self, exc: BaseException) -> dict[str, Any]:
        tb = _user_frames(exc.__traceback__)
        self._err.write("".join(traceback.format_exception(type(exc), exc, tb)))
        message, name = str(exc), type(exc).__name__
        return {"ok": False, "error": f"{name}: {message}" if message else name}


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    while tb is not None and tb.tb_next is not None:
        if not tb.tb_frame.f_globals.get("__name__", "").startswith(_PLUMBING):
            break
        tb = tb.tb_next
    return tb


def main() -> None:
    # The protocol keeps fds 0 and 1 (duplicated); the task's own fds 0/1 become
    # /dev/null and the worker's stderr, so nothing a task does can garble a frame.
    requests = os.fdopen(os.dup(0), "rb")  # buffered: a frame is one read(2), mostly
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    _die_with_parent(int(os.environ.get("TICKWORK_WORKER_PID", os.getppid())))
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    import_from_cwd()
    channel = _Channel(replies)
    runner = _Runner(channel)
    sys.stdout, sys.stderr = runner._out, runner._err
    while (request := read_frame(requests)) is not None:
        if "path" in request:  # the worker's import path, sent once
            sys.path[:0] = [p for p in request["path"] if p not in sys.path]
            continue
        channel.send(runner.run(request))


if __name__ == "__main__":
    main()
