"""Building runs: a job plus a logical date becomes a Run with one TaskRun per task."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tickwork.core.model import (
    Job,
    NewRun,
    Run,
    RunTrigger,
    TaskRun,
    TaskRunState,
)
from tickwork.core.states import derive_run_state


def new_run(
    job: Job,
    logical_date: datetime,
    *,
    trigger: RunTrigger,
    now: datetime,
    make_id: Callable[[], str],
    state: TaskRunState = TaskRunState.SCHEDULED,
    due_at: datetime | None = None,
) -> NewRun:
    """A run of ``job`` for ``logical_date`` whose root tasks start in ``state``.

    Tasks with upstreams start ``pending``. Each task run copies the task's definition and the
    effective policies (task overrides job), so later job changes never touch this run.
    """
    run_id = make_id()
    due = due_at or logical_date
    if state is TaskRunState.QUEUED and gated(job):
        state = TaskRunState.SCHEDULED  # the scheduler admits it (pool, run limit, past)
    task_runs = tuple(
        TaskRun(
            id=make_id(),
            run_id=run_id,
            job_id=job.id,
            job_name=job.name,
            task_name=task.name,
            kind=task.kind,
            config=task.config,
            state=state if not task.upstream else TaskRunState.PENDING,
            attempt=1,
            retry=task.retry or job.retry,
            due_at=due,
            logical_date=logical_date,
            timeout=task.timeout if task.timeout is not None else job.timeout,
            queue=job.queue,
            priority=job.priority if task.priority is None else task.priority,
            upstream=task.upstream,
            queued_at=now if state is TaskRunState.QUEUED else None,
            trigger_rule=task.trigger_rule,
            pool=task.pool,
            pool_slots=task.pool_slots,
            depends_on_past=job.depends_on_past,
            callbacks={**job.callbacks, **task.callbacks},
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
        created_at=now,
    )
    return NewRun(run=run, task_runs=task_runs)


def gated(job: Job) -> bool:
    """Whether the job's task runs wait for the scheduler's admission before they queue: a
    pool's free slots, ``max_active_runs``, or ``depends_on_past``."""
    return (
        job.max_active_runs is not None
        or job.depends_on_past
        or any(task.pool is not None for task in job.tasks)
    )


def skipped_run(
    job: Job, logical_date: datetime, *, now: datetime, make_id: Callable[[], str]
) -> NewRun:
    """A missed cron fire recorded as skipped (catchup=false), so users can see it."""
    return new_run(
        job,
        logical_date,
        trigger=RunTrigger.MISSED,
        now=now,
        make_id=make_id,
        state=TaskRunState.SKIPPED,
    )
