"""The runner port: what executes one attempt, and where its output goes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

from tickwork.core.model import (
    TaskRun,
)


class LogSink(Protocol):
    """Where a runner writes captured output; buffered and flushed in batches by the worker."""

    def write(self, stream: str, data: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RunResult:
    """What executing one attempt produced."""

    ok: bool
    error: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    result: Any = None  # what a python task returned (JSON-able); None: nothing


class Runner(Protocol):
    """Executes one attempt of one kind of task (shell, http, python)."""

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        """Run the attempt to the end, honouring ``task_run.timeout`` and ``cancel``.

        On timeout or when ``cancel`` is set, stop the work within one second (for shell:
        kill the process group) and return ``timed_out`` / ``cancelled``. Never raises for a
        failure of the task itself; that is ``ok=False`` with an ``error``.
        """
