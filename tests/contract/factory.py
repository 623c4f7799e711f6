"""Builders of domain records for the store contract tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from tickwork.core.model import (
    Job,
    NewRun,
    Outcome,
    RetryPolicy,
    Run,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRun,
    TaskRunState,
)
from tickwork.core.states import derive_run_state
from tickwork.ids import new_id

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def shell_task(name: str = "main", upstream: Sequence[str] = ()) -> Task:
    return Task(name=name, kind=TaskKind.SHELL, config={"argv": ["true"]}, upstream=tuple(upstream))


def make_job(
    name: str = "job",
    *,
    cron: str | None = None,
    next_fire_at: datetime | None = None,
    tasks: Sequence[Task] = (),
    priority: int = 0,
    paused: bool = False,
    retry: RetryPolicy | None = None,
) -> Job:
    kind = ScheduleKind.CRON if cron else ScheduleKind.NOW
    return Job(
        id=new_id(),
        name=name,
        schedule=Schedule(kind=kind, cron=cron, timezone="Europe/Berlin" if cron else "UTC"),
        tasks=tuple(tasks) or (shell_task(),),
        created_at=T0,
        updated_at=T0,
        retry=retry or RetryPolicy(),
        priority=priority,
        paused=paused,
        next_fire_at=next_fire_at,
    )


def make_run(
    job: Job,
    logical_date: datetime = T0,
    *,
    state: TaskRunState = TaskRunState.SCHEDULED,
    due_at: datetime | None = None,
    priority: int | None = None,
    trigger: RunTrigger = RunTrigger.SCHEDULE,
) -> NewRun:
    """A run of ``job`` with one task run per task, all in ``state``."""
    run_id = new_id()
    task_runs = tuple(
        TaskRun(
            id=new_id(),
            run_id=run_id,
            job_id=job.id,
            job_name=job.name,
            task_name=task.name,
            kind=task.kind,
            config=task.config,
            state=state,
            attempt=1,
            retry=task.retry or job.retry,
            due_at=due_at or logical_date,
            logical_date=logical_date,
            timeout=task.timeout,
            queue=job.queue,
            priority=job.priority if priority is None else priority,
            upstream=task.upstream,
            queued_at=logical_date if state == TaskRunState.QUEUED else None,
        )
        for task in job.tasks
    )
    run = Run(
        id=run_id,
        job_id=job.id,
        job_name=job.name,
        logical_date=logical_date,
        state=derive_run_state(tr.state for tr in task_runs),
        trigger=trigger,
        created_at=T0,
    )
    return NewRun(run=run, task_runs=task_runs)


def outcome(
    tr: TaskRun,
    state: TaskRunState,
    finished_at: datetime,
    *,
    retry_at: datetime | None = None,
    error: str | None = None,
    exit_code: int | None = None,
) -> Outcome:
    return Outcome(
        task_run_id=tr.id,
        attempt=tr.attempt,
        state=state,
        finished_at=finished_at,
        retry_at=retry_at,
        error=error,
        exit_code=exit_code,
        worker_id="w1",
    )


def key(tr: TaskRun) -> tuple[str, int]:
    return (tr.id, tr.attempt)
