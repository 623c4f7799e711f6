"""What a running python task can know about itself: ``tickwork.current_task()``.

Shell tasks get ``TICKWORK_RUN_ID`` and friends in their environment; a python function gets
the same facts without changing its signature (as Celery's ``self.request`` or Airflow's
context give them)::

    import tickwork

    def report(day: str) -> None:
        ctx = tickwork.current_task()
        print(ctx.run_id, ctx.attempt, ctx.logical_date, ctx.params)

Standard library only: it is imported by the worker's task processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class TaskContext:
    """The attempt a python task function is running as."""

    job: str
    task: str
    run_id: str
    task_run_id: str
    attempt: int
    logical_date: datetime
    queue: str = "default"
    params: Mapping[str, Any] = field(default_factory=dict)  # the keyword arguments it got

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "task": self.task,
            "run_id": self.run_id,
            "task_run_id": self.task_run_id,
            "attempt": self.attempt,
            "logical_date": self.logical_date.isoformat(),
            "queue": self.queue,
            "params": dict(self.params),
        }

    def env(self) -> dict[str, str]:
        """The ``TICKWORK_*`` variables of this attempt (``task_env``)."""
        return task_env(self.job, self.run_id, self.task_run_id, self.attempt, self.logical_date)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskContext:
        return cls(**{**data, "logical_date": datetime.fromisoformat(data["logical_date"])})


def task_env(
    job: str, run_id: str, task_run_id: str, attempt: int, logical_date: datetime
) -> dict[str, str]:
    """The variables that tell a task, and every process it starts, which job, run and
    attempt it is executing (the worker finds an attempt's processes by them)."""
    return {
        "TICKWORK_JOB": job,
        "TICKWORK_RUN_ID": run_id,
        "TICKWORK_TASK_RUN_ID": task_run_id,
        "TICKWORK_ATTEMPT": str(attempt),
        "TICKWORK_LOGICAL_DATE": logical_date.astimezone(UTC).isoformat().replace("+00:00", "Z"),
    }


_current: ContextVar[TaskContext | None] = ContextVar("tickwork_task", default=None)


def current_task() -> TaskContext:
    """The context of the task this code runs in; ``LookupError`` outside a task."""
    ctx = _current.get()
    if ctx is None:
        raise LookupError("tickwork.current_task() is only available inside a running task")
    return ctx


def enter(ctx: TaskContext | None) -> Token[TaskContext | None]:
    return _current.set(ctx)


def leave(token: Token[TaskContext | None]) -> None:
    _current.reset(token)
