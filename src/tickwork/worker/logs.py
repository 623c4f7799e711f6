"""Captured output of running tasks, buffered per task run and written to the store in batches.

Each attempt's log is capped (``DEFAULT_LOG_MAX_BYTES``, or the task's ``config.log_max_bytes``):
the first half of the budget is stored as it comes, the last half is kept in memory as a
rolling tail and stored when the attempt ends, with one ``system`` line between them saying
how much was dropped. A task printing 100 MiB costs at most the cap in the store and the tail
budget in the worker's memory.

Attempt ``n`` numbers its chunks from ``(n - 1) << 20`` (``first_seq``), so a reader that
follows with ``after_seq`` sees every attempt's output in order. The cap also bounds the
chunks of an attempt well below ``2**20``, so one attempt can never spill into the next one's
range (an attempt with more than ``2**20`` prints used to overwrite the next attempt's log).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from tickwork.core.model import ATTEMPT_SHIFT, LogChunk, TaskRun, first_seq
from tickwork.ports import LogSink

MAX_CHUNK = 64 * 1024
DEFAULT_LOG_MAX_BYTES = 16 * 1024 * 1024
# Chunks of one attempt's range [first_seq(n), first_seq(n + 1) - 1): the last seq belongs to
# the callback error line (hooks.task_log). The head and the tail get a share each, and what
# is written after the attempt ended (late output, the outcome line) the rest.
_RANGE = 1 << ATTEMPT_SHIFT
HEAD_CHUNKS = _RANGE // 2
TAIL_ITEMS = _RANGE // 8
SYSTEM_LINE_MAX = 4096  # characters of one line of ours (an error message) that are kept


def log_max_bytes(config: Mapping[str, Any]) -> int:
    """A task's log cap: its ``config.log_max_bytes`` (checked at save time) or the default."""
    value = config.get("log_max_bytes")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return DEFAULT_LOG_MAX_BYTES


def _size(data: str) -> int:
    return len(data.encode("utf-8", "replace"))


class TaskLog:
    """A `LogSink` for one attempt: caps, numbers and hands chunks to a shared buffer.

    ``tail``, if given, sees every write (the end of the output, for callbacks). Call
    :meth:`close` when the attempt ends: it stores the kept tail and the truncation note.
    """

    def __init__(
        self,
        task_run: TaskRun,
        emit: Callable[[LogChunk], asyncio.Future[None]],
        clock: Callable[[], datetime],
        tail: LogSink | None = None,
        max_bytes: int = DEFAULT_LOG_MAX_BYTES,
    ) -> None:
        self._task_run = task_run
        self._first = self._seq = first_seq(task_run.attempt)
        self._end = first_seq(task_run.attempt + 1) - 1  # exclusive: the last seq is reserved
        self._emit = emit
        self._clock = clock
        self._last: asyncio.Future[None] | None = None
        self._tail = tail
        self._head_budget = max_bytes // 2
        self._head_left = self._head_budget
        self._tail_budget = max_bytes - self._head_left
        self._kept: deque[tuple[str, str, int]] = deque()  # (stream, data, bytes), in tail mode
        self._kept_bytes = 0
        self._dropped = 0  # bytes of output dropped between the head and the tail
        self._truncating = False
        self._closed = False

    @property
    def dropped(self) -> int:
        return self._dropped

    def write(self, stream: str, data: str) -> None:
        if self._tail is not None:
            self._tail.write(stream, data)
        if not data:
            return
        if stream == "system":  # our own lines: never dropped, but bounded
            self._system(data)
        elif self._closed:
            self._late(stream, data)
        elif self._truncating:
            self._keep(stream, data)
        else:
            self._head(stream, data)

    def close(self) -> None:
        """The attempt ended: store the truncation note and the kept tail."""
        if self._closed:
            return
        self._closed = True
        if not self._truncating:
            return
        self._put(
            "system",
            f"[tickwork: {self._dropped} bytes of output dropped here; an attempt's log keeps "
            f"its first {_mib(self._head_budget)} and last {_mib(self._tail_budget)} "
            "(log_max_bytes)]\n",
        )
        pending_stream, pending = "", ""
        for stream, data, _ in self._kept:
            if stream == pending_stream and len(pending) + len(data) <= MAX_CHUNK:
                pending += data
                continue
            if pending:
                self._put(pending_stream, pending)
            pending_stream, pending = stream, data
        if pending:
            self._put(pending_stream, pending)
        self._kept.clear()

    async def flushed(self) -> None:
        """Wait until everything written so far is stored (batches are written in order)."""
        if self._last is not None:
            await asyncio.shield(self._last)

    # -- the cap ---------------------------------------------------------------------
    def _head(self, stream: str, data: str) -> None:
        room = self._head_left if self._seq - self._first < HEAD_CHUNKS else 0
        size = _size(data)
        if size <= room:
            self._head_left -= size
            self._put(stream, data)
            return
        # Over the head budget: store what fits, keep the rest as the start of the tail.
        fits = data.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
        if fits:
            self._head_left -= _size(fits)
            self._put(stream, fits)
            data = data[len(fits) :]
        self._truncating = True
        self._keep(stream, data)

    def _keep(self, stream: str, data: str) -> None:
        size = _size(data)
        if size > self._tail_budget:  # only its end can be kept
            cut = data.encode("utf-8", "replace")[-self._tail_budget :].decode("utf-8", "ignore")
            self._dropped += size - _size(cut)
            data, size = cut, _size(cut)
        self._kept.append((stream, data, size))
        self._kept_bytes += size
        while self._kept_bytes > self._tail_budget or len(self._kept) > TAIL_ITEMS:
            _, _, gone = self._kept.popleft()
            self._kept_bytes -= gone
            self._dropped += gone

    def _late(self, stream: str, data: str) -> None:
        # Output after the attempt ended (a thread that ran on): stored while there is room.
        if self._seq < self._end - 1:
            self._put(stream, data[:MAX_CHUNK])

    def _system(self, data: str) -> None:
        if len(data) > SYSTEM_LINE_MAX:
            data = data[:SYSTEM_LINE_MAX] + f"… [{_size(data)} bytes in all]\n"
        if self._truncating and not self._closed:
            self._keep("system", data)
        elif self._seq < self._end:
            self._put("system", data)

    def _put(self, stream: str, data: str) -> None:
        for start in range(0, len(data), MAX_CHUNK):
            if self._seq >= self._end:
                return
            self._last = self._emit(
                LogChunk(
                    task_run_id=self._task_run.id,
                    attempt=self._task_run.attempt,
                    seq=self._seq,
                    stream=stream,
                    data=data[start : start + MAX_CHUNK],
                    created_at=self._clock(),
                )
            )
            self._seq += 1


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB" if size >= 1024 * 1024 else f"{size} bytes"
