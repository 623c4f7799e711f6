"""Who may act on a job or its runs: the one scope check every such route makes.

A router's ``requires(scope)`` only says what the route needs at least. What a job runs
decides the rest: a job with a ``shell`` or ``python`` task, or a ``python`` callback, runs
code on workers, so only ``admin`` may *manage* it (change, pause, resume, delete, cancel or
retry its runs). Who may *run* it (trigger, enqueue, backfill) is the job's params contract
``scope`` when set, else the same as manage.

For new routes, in order of preference:

- a path with ``{name}``: take ``ManagedJob`` or ``RunnableJob`` as a parameter;
- a path with ``{run_id}`` / ``{task_run_id}``: ``ManagedRun`` / ``ManagedTaskRun``;
- anything else: call ``require_job_access(token, job, action)`` (or ``require_run_access``)
  with the token from ``TokenDep`` once the job is known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Annotated

from fastapi import Depends, Path, Request

from tickwork.api.auth import CODE_TASKS, AuthError, current_token, require_scope
from tickwork.api.deps import services_of
from tickwork.core.model import Callbacks, Job, RunDetail, TaskKind, TaskRun
from tickwork.ports import ApiToken, Scope


class JobAction(StrEnum):
    """What a route does to a job: ``manage`` it (or its runs), or ``run`` it."""

    MANAGE = "manage"
    RUN = "run"


def runs_code(kinds: Iterable[TaskKind], callbacks: Iterable[Callbacks]) -> bool:
    """Whether tasks of ``kinds`` with ``callbacks`` run code on workers."""
    if CODE_TASKS.intersection(kinds):
        return True
    return any(hook.kind in CODE_TASKS for hooks in callbacks for hook in hooks.values())


def job_scope(job: Job, action: JobAction = JobAction.MANAGE) -> Scope:
    """The scope ``action`` on ``job`` needs."""
    if action is JobAction.RUN and job.params.scope is not None:
        return Scope(job.params.scope)
    tasks = job.tasks
    code = runs_code((t.kind for t in tasks), [*(t.callbacks for t in tasks), job.callbacks])
    return Scope.ADMIN if code else Scope.WRITE


def require_job_access(token: ApiToken, job: Job, action: JobAction) -> None:
    """``AuthError`` 403 unless ``token`` may do ``action`` on ``job``."""
    needed = job_scope(job, action)
    if not token.scope.allows(needed):
        raise AuthError(
            403,
            "forbidden",
            f"needs a `{needed}` token to {action} job {job.name!r}"
            + (" (it runs code on workers)" if needed is Scope.ADMIN else ""),
        )


def job_check(token: ApiToken, action: JobAction) -> Callable[[Job], None]:
    """``require_job_access`` for a job the service reads itself (trigger, enqueue)."""
    return lambda job: require_job_access(token, job, action)


def run_scope(detail: RunDetail, job: Job | None) -> Scope:
    """The scope acting on a run needs: ``write`` when its own task runs (what a retry
    executes again) run no code; else what running its live ``job`` needs, ``admin`` when the
    job is gone or changed."""
    trs: tuple[TaskRun, ...] = detail.task_runs
    if not runs_code((tr.kind for tr in trs), (tr.callbacks for tr in trs)):
        return Scope.WRITE
    if job is not None and job.id == detail.run.job_id and job.params.scope == Scope.WRITE:
        same = {t.name: t.kind for t in job.tasks} == {tr.task_name: tr.kind for tr in trs}
        return Scope.WRITE if same else Scope.ADMIN
    return Scope.ADMIN


async def require_run_access(request: Request, token: ApiToken, detail: RunDetail) -> None:
    """``AuthError`` 403 unless ``token`` may cancel or retry the run ``detail``."""
    if token.scope.allows(Scope.ADMIN):
        return
    job = await services_of(request).store.get_job(detail.run.job_name)
    needed = run_scope(detail, job)
    require_scope(token, needed, f"to act on run {detail.run.id} (it runs code on workers)")


async def _managed_job(name: Annotated[str, Path()], request: Request) -> Job:
    return await _job(request, name, JobAction.MANAGE)


async def _runnable_job(name: Annotated[str, Path()], request: Request) -> Job:
    return await _job(request, name, JobAction.RUN)


async def _job(request: Request, name: str, action: JobAction) -> Job:
    token = await current_token(request)
    job = await services_of(request).get_job(name)
    require_job_access(token, job, action)
    return job


async def _managed_run(run_id: Annotated[str, Path()], request: Request) -> RunDetail:
    token = await current_token(request)
    detail = await services_of(request).get_run(run_id)
    await require_run_access(request, token, detail)
    return detail


async def _managed_task_run(task_run_id: Annotated[str, Path()], request: Request) -> RunDetail:
    token = await current_token(request)
    services = services_of(request)
    task_run = await services.get_task_run(task_run_id)
    detail = await services.get_run(task_run.run_id)
    await require_run_access(request, token, detail)
    return detail


#: The job at ``{name}``, once the token may manage it (403 otherwise, 404 if none).
ManagedJob = Annotated[Job, Depends(_managed_job)]
#: The job at ``{name}``, once the token may trigger/enqueue/backfill it.
RunnableJob = Annotated[Job, Depends(_runnable_job)]
#: The run at ``{run_id}``, once the token may cancel or retry it.
ManagedRun = Annotated[RunDetail, Depends(_managed_run)]
#: The run of the task run at ``{task_run_id}``, once the token may cancel or retry it.
ManagedTaskRun = Annotated[RunDetail, Depends(_managed_task_run)]
