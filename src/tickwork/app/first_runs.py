"""From a ``JobSpec`` to a ``Job`` and the runs it starts with: its first fire (cron), its
queued run (``now``) or its scheduled run (``at``). Pure: ``now`` and ``make_id`` are given."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from tickwork.app.records import JobSpec
from tickwork.core.errors import Conflict
from tickwork.core.model import Job, NewRun, RunTrigger, ScheduleKind, TaskRunState
from tickwork.core.runs import new_run
from tickwork.core.schedule import first_fire


def job_from(spec: JobSpec, now: datetime, make_id: Callable[[], str]) -> Job:
    """A new job (fresh id, created and updated ``now``) carrying everything ``spec`` asks."""
    return Job(
        id=make_id(),
        name=spec.name,
        schedule=spec.schedule,
        tasks=spec.tasks,
        created_at=now,
        updated_at=now,
        retry=spec.retry,
        timeout=spec.timeout,
        queue=spec.queue,
        priority=spec.priority,
        catchup=spec.catchup,
        jitter=spec.jitter,
        tags=spec.tags,
        metadata=spec.metadata,
        max_active_runs=spec.max_active_runs,
        depends_on_past=spec.depends_on_past,
        callbacks=spec.callbacks,
        params=spec.params,
        start_deadline=spec.start_deadline,
        sla=spec.sla,
    )


def first_runs(job: Job, now: datetime, make_id: Callable[[], str]) -> tuple[Job, list[NewRun]]:
    """``job`` with its next fire set (cron), or with the run its schedule asks for."""
    kind = job.schedule.kind
    if kind is ScheduleKind.CRON:
        return replace(job, next_fire_at=first_fire(job.schedule, now)), []
    if kind is ScheduleKind.NOW:
        return job, [queued_run(job, now, RunTrigger.SCHEDULE, now, make_id)]
    at = job.schedule.at
    assert at is not None  # validate_job guarantees an instant for `at` jobs
    scheduled = new_run(job, at, trigger=RunTrigger.SCHEDULE, now=now, make_id=make_id, due_at=at)
    return job, [scheduled]


def queued_run(
    job: Job,
    logical_date: datetime,
    trigger: RunTrigger,
    now: datetime,
    make_id: Callable[[], str],
) -> NewRun:
    """A run of ``job`` due now whose task runs are already queued."""
    # Immediate runs bypass the scheduler: their task runs are stored queued and published
    # right after the commit (the reconciler re-sends them if the process dies in between).
    return new_run(
        job,
        logical_date,
        trigger=trigger,
        now=now,
        make_id=make_id,
        state=TaskRunState.QUEUED,
        due_at=now,
    )


def refuse_duplicate_names(jobs: Sequence[Job], total: int) -> None:
    """``Conflict`` naming the first job of a batch whose name appeared before it."""
    seen: set[str] = set()
    for i, job in enumerate(jobs):
        if job.name in seen:
            where = f"jobs[{i}].name" if total > 1 else "name"
            raise Conflict(where, f"the name {job.name!r} appears twice in this batch")
        seen.add(job.name)
