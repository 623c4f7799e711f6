"""Callback failures written into the task run's own log, where ``tickwork run logs`` shows them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from tickwork.core.model import LogChunk, first_seq

log = logging.getLogger("tickwork.hooks")

MAX_BATCH = 1000
STREAM = "system"


class LogWriter(Protocol):
    async def append_logs(self, chunks: Sequence[LogChunk]) -> None: ...


class CallbackErrorLog:
    """An ``ErrorSink`` for :class:`~tickwork.hooks.Hooks`: each failed callback becomes one
    ``system`` line in the log of the attempt that fired it, e.g. ``on_failure callback
    failed: timed out after 10 s``.

    The line takes the last ``seq`` of that attempt's range, so it reads after everything
    the attempt printed and before the next attempt's output. A callback fires once per
    attempt, so the seq is free; a line written twice is stored once. Lines are written in
    the background, batched while a write is in flight; a failed write is logged, never
    raised (the process log has the callback's failure in any case). Call :meth:`flush`
    after ``Hooks.close``.
    """

    def __init__(self, store: LogWriter, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock
        self._lines: list[LogChunk] = []
        self._writer: asyncio.Task[None] | None = None

    def __call__(self, task_run_id: str, attempt: int, message: str) -> None:
        seq = first_seq(attempt + 1) - 1
        self._lines.append(
            LogChunk(task_run_id, attempt, seq, STREAM, f"{message}\n", self._clock())
        )
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(
                self._write(), name="hooks:error-log"
            )

    async def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the lines reported so far to be written."""
        if self._writer is not None and not self._writer.done():
            await asyncio.wait({self._writer}, timeout=timeout)
        if self._lines:
            log.warning("%d callback failure line(s) not written to task logs", len(self._lines))

    async def _write(self) -> None:
        while self._lines:
            batch, self._lines = self._lines[:MAX_BATCH], self._lines[MAX_BATCH:]
            try:
                await self._store.append_logs(batch)
            except Exception as exc:  # the database away: the process log still has them
                log.warning(
                    "%d callback failure line(s) not written to task logs: %s", len(batch), exc
                )
