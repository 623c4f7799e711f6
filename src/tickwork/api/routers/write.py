"""The write side: create, apply, delete, trigger, pause and resume jobs; cancel and retry runs
and single task runs.

Each route parses its schema, calls one service and maps the result to a response schema.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status

from tickwork.api.access import (
    JobAction,
    ManagedJob,
    ManagedRun,
    ManagedTaskRun,
    job_check,
)
from tickwork.api.auth import TokenDep, authenticate, require_job_scope
from tickwork.api.deps import ServicesDep
from tickwork.api.hot import HotRoute, enqueue_one
from tickwork.api.idempotency import (
    IdempotencyKeyDep,
    IdempotentRoute,
    receipt_of,
)
from tickwork.api.schemas import (
    JobBatchCreate,
    JobCreate,
    JobRead,
    RunDetailRead,
    TriggerIn,
)
from tickwork.api.schemas.applied import JobApplied
from tickwork.api.schemas.create import user_errors
from tickwork.api.schemas.enqueue import (
    EnqueueBatchIn,
    EnqueuedBatchRead,
    EnqueuedRead,
    EnqueueIn,
)
from tickwork.api.schemas.update import JobUpdate
from tickwork.app.apply import ApplyOutcome, apply_job
from tickwork.core.errors import ValidationError
from tickwork.core.model import Job

router = APIRouter(tags=["write"], route_class=IdempotentRoute)

AllowPast = Annotated[
    bool, Query(description="Accept an `at` instant in the past (it runs at once).")
]


# The task-queue routes first: a request is matched against the routes in order, and
# these are the hot path.
async def enqueue_run(
    name: str, request: Request, body: Annotated[EnqueueIn | None, Body()] = None
) -> Response:
    """Enqueue one run of the job with optional `params`, `priority` and `at`/`delay`
    (task-queue style). Unlike trigger, many runs may share a logical date (the enqueue
    instant). A paused job takes them as it takes triggered runs; one with `at`/`delay`
    waits for its resume."""
    # Reached for requests the hot route's lean handler hands on (api/hot.py).
    return await enqueue_one(request, name, await authenticate(request, None), body)


router.add_api_route(
    "/jobs/{name}/runs", enqueue_run, methods=["POST"], status_code=status.HTTP_201_CREATED,
    response_model=EnqueuedRead, route_class_override=HotRoute,
)  # fmt: skip


@router.post("/jobs/{name}/runs/batch", status_code=status.HTTP_201_CREATED)
async def enqueue_runs(
    name: str,
    body: EnqueueBatchIn,
    services: ServicesDep,
    token: TokenDep,
    key: IdempotencyKeyDep,
) -> EnqueuedBatchRead:
    """Enqueue up to 5,000 runs of the job in one transaction, all or none; answers their
    ids in the order of the items. Errors name the item: `items[3].priority`."""
    receipt = receipt_of(key, EnqueuedBatchRead.of)
    items = body.to_items(services.now())
    check = job_check(token, JobAction.RUN)
    done = await services.enqueue_many(name, items, receipt=receipt, check=check)
    return EnqueuedBatchRead.of(done)


@router.post("/jobs", status_code=status.HTTP_201_CREATED)
async def create_job(
    body: JobCreate,
    services: ServicesDep,
    token: TokenDep,
    key: IdempotencyKeyDep,
    allow_past: AllowPast = False,
) -> JobRead:
    """Create a job. A `now` job is queued at once; an `at` job waits for its instant.

    `shell` and `python` tasks and `python` callbacks need an `admin` token."""
    with user_errors([body]):
        spec = body.to_spec()
        require_job_scope(token, spec.tasks, [spec.callbacks])
        receipt = receipt_of(key, JobRead.model_validate)
        job = await services.create_job(spec, allow_past=allow_past, receipt=receipt)
    return JobRead.model_validate(job)


@router.post("/jobs/batch", status_code=status.HTTP_201_CREATED)
async def create_jobs(
    body: JobBatchCreate,
    services: ServicesDep,
    token: TokenDep,
    key: IdempotencyKeyDep,
    allow_past: AllowPast = False,
) -> list[JobRead]:
    """Create up to 1000 jobs in one transaction: all of them, or none.

    `shell` and `python` tasks and `python` callbacks need an `admin` token."""
    with user_errors(body.jobs):
        specs = [job.to_spec() for job in body.jobs]
        tasks = [t for spec in specs for t in spec.tasks]
        require_job_scope(token, tasks, [spec.callbacks for spec in specs])
        receipt = receipt_of(key, _job_reads)
        jobs = await services.create_jobs(specs, allow_past=allow_past, receipt=receipt)
    return _job_reads(jobs)


@router.patch("/jobs/{name}")
async def update_job(
    name: str,
    body: JobUpdate,
    services: ServicesDep,
    token: TokenDep,
    allow_past: AllowPast = False,
) -> JobRead:
    """Change a job for its future runs; runs already created keep their tasks.

    A new cron schedule fires next after now; a new `now`/`at` schedule gets its run as on
    create. The pause state is kept. A job with `shell` or `python` tasks or `python`
    callbacks (before or after the change) needs an `admin` token.
    """
    with user_errors([body]):
        changes = body.to_changes()
        current = await services.get_job(name)
        tasks = [*current.tasks, *changes.get("tasks", ())]
        require_job_scope(token, tasks, [current.callbacks, changes.get("callbacks", {})])
        job = await services.update_job(name, changes, allow_past=allow_past)
    return JobRead.model_validate(job)


@router.put(
    "/jobs/{name}",
    responses={201: {"model": JobApplied, "description": "The job did not exist: created."}},
)
async def apply(
    name: str,
    body: JobCreate,
    *,
    response: Response,
    services: ServicesDep,
    token: TokenDep,
    allow_past: AllowPast = False,
) -> JobApplied:
    """Create or update a job from its whole definition (`tickwork job apply`): 201 and
    `created` when there was none; else 200 and `updated` (for its future runs, as `PATCH`)
    or `unchanged` (nothing written) when the definition is the same.

    The same scopes as create and `PATCH` apply."""
    with user_errors([body]):
        if body.name != name:
            raise ValidationError("name", f"must be the name in the path ({name!r})")
        spec = body.to_spec()
        current = await services.store.get_job(name)
        tasks = [*spec.tasks, *(current.tasks if current else ())]
        callbacks = [spec.callbacks, *([current.callbacks] if current else [])]
        require_job_scope(token, tasks, callbacks)
        applied = await apply_job(services, spec, allow_past=allow_past)
    if applied.outcome is ApplyOutcome.CREATED:
        response.status_code = status.HTTP_201_CREATED
    return JobApplied.of(applied)


@router.delete("/jobs/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_job(name: str, job: ManagedJob, services: ServicesDep) -> None:
    """Delete a job and cancel its unfinished runs; its history stays readable.

    A job that runs code (`shell`/`python` tasks, `python` callbacks) needs `admin`."""
    await services.delete_job(job.name)


@router.post("/jobs/{name}/trigger", status_code=status.HTTP_201_CREATED)
async def trigger_job(
    name: str,
    services: ServicesDep,
    token: TokenDep,
    key: IdempotencyKeyDep,
    body: Annotated[TriggerIn | None, Body()] = None,
) -> RunDetailRead:
    """Run a job now, by hand, with optional `params` (only those the job declares). A second
    run for the same logical date is refused (409). Needs the job's `params.scope`, by
    default `admin` for a job that runs code."""
    body = body or TriggerIn()
    receipt = receipt_of(key, RunDetailRead.of)
    check = job_check(token, JobAction.RUN)
    run = await services.trigger(name, body.logical_date, body.params, receipt=receipt, check=check)
    return RunDetailRead.of(run)


@router.post("/jobs/{name}/pause")
async def pause_job(name: str, job: ManagedJob, services: ServicesDep) -> JobRead:
    """Stop creating new runs for a job. A job that runs code needs `admin`."""
    return JobRead.model_validate(await services.pause(job.name))


@router.post("/jobs/{name}/resume")
async def resume_job(name: str, job: ManagedJob, services: ServicesDep) -> JobRead:
    """Resume a job; missed fires follow its catch-up rule. A job that runs code needs
    `admin`."""
    return JobRead.model_validate(await services.resume(job.name))


@router.post("/runs/{run_id}/cancel")
async def cancel_run(run_id: str, run: ManagedRun, services: ServicesDep) -> RunDetailRead:
    """Cancel a run; running tasks are killed within about a second. A run that runs code
    needs `admin` (or `write`, when its job's `params.scope` says so)."""
    return RunDetailRead.of(await services.cancel_run(run.run.id))


@router.post("/runs/{run_id}/retry")
async def retry_run(run_id: str, run: ManagedRun, services: ServicesDep) -> RunDetailRead:
    """Replay a run's dead-lettered (failed), upstream-failed or cancelled tasks. Scopes as
    for cancel."""
    return RunDetailRead.of(await services.retry_run(run.run.id))


@router.post("/runs/{run_id}/replay")
async def replay_run(run_id: str, run: ManagedRun, services: ServicesDep) -> RunDetailRead:
    """Mark a finished run for replay: every task runs again (one more attempt each, due now,
    in DAG order), the attempts so far kept. An unfinished run is a 409. Scopes as for
    cancel."""
    return RunDetailRead.of(await services.replay_run(run.run.id))


@router.post("/task-runs/{task_run_id}/cancel")
async def cancel_task_run(
    task_run_id: str, run: ManagedTaskRun, services: ServicesDep
) -> RunDetailRead:
    """Cancel one task of a run and return the run. A task at rest is cancelled at once; a
    running one is killed by its worker within about a second. A finished task is a 409.
    Scopes as for cancelling the run."""
    return RunDetailRead.of(await services.cancel_task_run(task_run_id))


@router.post("/task-runs/{task_run_id}/retry")
async def retry_task_run(
    task_run_id: str, run: ManagedTaskRun, services: ServicesDep
) -> RunDetailRead:
    """Replay one dead-lettered (failed), upstream-failed or cancelled task and return the run.

    It is scheduled at once with one more attempt. A task in any other state is a 409.
    Scopes as for retrying the run."""
    return RunDetailRead.of(await services.retry_task_run(task_run_id))


def _job_reads(jobs: list[Job]) -> list[JobRead]:
    return [JobRead.model_validate(job) for job in jobs]
