"""OpenTelemetry tracing (``pip install tickwork[otel]``); off until configured."""

from __future__ import annotations

import asyncio

from tickwork.core.model import TaskRun
from tickwork.ports import LogSink, Runner, RunResult

_enabled = False


def enabled() -> bool:
    return _enabled


async def traced_attempt(
    runner: Runner, task_run: TaskRun, log: LogSink, cancel: asyncio.Event
) -> RunResult:
    return await runner.run(task_run, log, cancel)
