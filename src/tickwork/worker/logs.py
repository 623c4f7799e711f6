"""Captured output of running tasks, buffered per task run and written to the store in batches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from tickwork.core.model import LogChunk, TaskRun, first_seq
from tickwork.ports import LogSink

MAX_CHUNK = 64 * 1024


class TaskLog:
    """A `LogSink` for one attempt: numbers chunks and hands them to a shared buffer.

    Attempt ``n`` numbers its chunks from ``(n - 1) << 20``, so a reader that follows with
    ``after_seq`` sees every attempt's output in order without asking the store where the
    previous attempt stopped (2**20 chunks of up to 64 KiB per attempt). ``tail``, if
    given, sees every write too (the end of the output, for callbacks).
    """

    def __init__(
        self,
        task_run: TaskRun,
        emit: Callable[[LogChunk], asyncio.Future[None]],
        clock: Callable[[], datetime],
        tail: LogSink | None = None,
    ) -> None:
        self._task_run = task_run
        self._seq = first_seq(task_run.attempt)
        self._emit = emit
        self._clock = clock
        self._last: asyncio.Future[None] | None = None
        self._tail = tail

    def write(self, stream: str, data: str) -> None:
        if self._tail is not None:
            self._tail.write(stream, data)
        for start in range(0, len(data), MAX_CHUNK):
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

    async def flushed(self) -> None:
        """Wait until everything written so far is stored (batches are written in order)."""
        if self._last is not None:
            await asyncio.shield(self._last)
