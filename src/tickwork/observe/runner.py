"""``ObservedRunner``: "execute a task" wrapped with the attempt's log context (and its trace
span, when tracing is on). The worker pool runs it like any runner."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TypeVar

from tickwork.core.model import TaskKind, TaskRun
from tickwork.observe import tracing
from tickwork.observe.logs import bind_attempt, unbind
from tickwork.ports import LogSink, Runner, RunResult

K = TypeVar("K")


class ObservedRunner:
    def __init__(self, runner: Runner) -> None:
        self.inner = runner

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        token = bind_attempt(task_run)
        try:
            if tracing.enabled():
                return await tracing.traced_attempt(self.inner, task_run, log, cancel)
            return await self.inner.run(task_run, log, cancel)
        finally:
            unbind(token)

    def __getattr__(self, name: str) -> object:  # close() and the like reach the runner
        return getattr(self.inner, name)


def observed_runners(runners: Mapping[TaskKind, Runner]) -> dict[TaskKind, Runner]:
    return {kind: ObservedRunner(runner) for kind, runner in runners.items()}
