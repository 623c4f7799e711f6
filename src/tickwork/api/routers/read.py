"""The read side: jobs, upcoming fires, runs, logs and cron previews. No writes here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from tickwork.api.deps import ServicesDep
from tickwork.api.schemas import (
    FiresRead,
    JobPageRead,
    JobRead,
    LogsRead,
    RunDetailRead,
    RunPageRead,
)
from tickwork.api.schemas.instant import IsoDatetime, IsoInstant
from tickwork.api.schemas.search import DeadLetterPageRead
from tickwork.app.run_cases import RUN_STATE_FILTERS
from tickwork.core.errors import ValidationError
from tickwork.core.jitter import check_jitter, spread_fires
from tickwork.core.model import RunState, RunTrigger, ScheduleKind
from tickwork.ports import JobFilter, RunFilter, TimeWindow

router = APIRouter(tags=["read"])

#: Service parameter names → the query names a user typed.
_PREVIEW_PARAMS = {"timezone": "tz", "after": "from"}

Count = Annotated[int, Query(ge=1, le=1000, description="How many fire times.")]


@router.get("/jobs")
async def list_jobs(
    *,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after: Annotated[str | None, Query(description="Start after this job name.")] = None,
    prefix: Annotated[str | None, Query(description="Names starting with this.")] = None,
    tag: Annotated[str | None, Query(description="Jobs carrying this tag.")] = None,
    paused: Annotated[bool | None, Query(description="Only paused (or unpaused) jobs.")] = None,
    schedule_kind: Annotated[ScheduleKind | None, Query(description="`now`, `at` or `cron`.")] = (
        None
    ),
    queue: Annotated[str | None, Query(description="Jobs routed to this queue.")] = None,
    last_state: Annotated[
        RunState | None, Query(description="Jobs whose newest run is in this state.")
    ] = None,
) -> JobPageRead:
    """Live jobs ordered by name, filtered; pass `next_after` as `after` for the next page."""
    where = JobFilter(
        name_prefix=prefix,
        tag=tag,
        paused=paused,
        schedule_kind=schedule_kind.value if schedule_kind else None,
        queue=queue,
        last_state=last_state.value if last_state else None,
    )
    return JobPageRead.of(await services.list_jobs(limit=limit, after=after, where=where))


@router.get("/jobs/{name}")
async def get_job(name: str, services: ServicesDep) -> JobRead:
    """One job."""
    return JobRead.model_validate(await services.get_job(name))


@router.get("/jobs/{name}/upcoming")
async def upcoming(name: str, services: ServicesDep, count: Count = 10) -> FiresRead:
    """The job's next fire times (none for a `now` job or a finished `at` job)."""
    up = await services.upcoming_due(name, count)
    return FiresRead.of(up.fires, up.job.schedule.timezone, up.dues)


Instant = Annotated[IsoInstant | None, Query(description="ISO 8601 with an offset.")]


@router.get("/runs")
async def list_runs(
    *,
    services: ServicesDep,
    job: Annotated[str | None, Query(description="A job name.")] = None,
    state: Annotated[
        str | None,
        Query(
            description="A run state, or `dead`: runs holding a dead-lettered task.",
            # Documented here, checked by the service (its message lists the states).
            json_schema_extra={"enum": list(RUN_STATE_FILTERS)},
        ),
    ] = None,
    logical_from: Instant = None,
    logical_to: Instant = None,
    started_from: Instant = None,
    started_to: Instant = None,
    trigger: Annotated[RunTrigger | None, Query(description="Why the run exists.")] = None,
    tag: Annotated[str | None, Query(description="Runs of jobs carrying this tag.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the last page.")] = None,
) -> RunPageRead:
    """Runs, newest logical date first. `state=dead` lists runs holding a dead-lettered task.

    `*_from` bounds are inclusive, `*_to` bounds exclusive. Keep the other filters the same
    when passing `cursor`.
    """
    window = TimeWindow(logical_from, logical_to, started_from, started_to)
    also = RunFilter(trigger=trigger.value if trigger else None, tag=tag)
    page = await services.list_runs(
        job=job, state=state, limit=limit, cursor=cursor, window=window, also=also
    )
    return RunPageRead.of(page)


@router.get("/dead-letters")
async def dead_letters(
    services: ServicesDep,
    job: Annotated[str | None, Query(description="A job name.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the last page.")] = None,
) -> DeadLetterPageRead:
    """Task runs that failed their last attempt, newest first. Replay: `POST /runs/{id}/retry`."""
    page = await services.dead_letters(job=job, limit=limit, cursor=cursor)
    return DeadLetterPageRead.of(page)


@router.get("/runs/{run_id}")
async def get_run(run_id: str, services: ServicesDep) -> RunDetailRead:
    """A run with its task runs and attempts."""
    return RunDetailRead.of(await services.get_run(run_id))


@router.get("/runs/{run_id}/logs")
async def run_logs(
    run_id: str,
    services: ServicesDep,
    task: Annotated[str | None, Query(description="Task name (for multi-task runs).")] = None,
    after_seq: Annotated[int, Query(ge=-1)] = -1,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> LogsRead:
    """Captured output after `after_seq`, at most `limit` chunks and about 1 MiB of text.
    Poll with `next_after_seq` until `finished` and a page comes back empty."""
    page = await services.logs(run_id, task=task, after_seq=after_seq, limit=limit)
    return LogsRead.of(page)


@router.get("/schedule/preview")
async def preview(
    services: ServicesDep,
    cron: Annotated[str, Query(description="A 5-field cron expression.")],
    tz: Annotated[str, Query(description="IANA zone.")] = "UTC",
    count: Count = 10,
    from_: Annotated[IsoDatetime | None, Query(alias="from", description="Default: now.")] = None,
    *,
    jitter: Annotated[
        float, Query(description="Seconds fires are spread over (a job's jitter).")
    ] = 0.0,
    job: Annotated[str, Query(description="The job name the spread is drawn from.")] = "",
) -> FiresRead:
    """The next fire times of a cron expression, and when their runs would be due with a
    `jitter` for the job named `job`. Creates nothing."""
    try:
        fires = services.preview(cron, tz, count, from_)
        spread = check_jitter(jitter) or 0.0
        following = services.preview(cron, tz, 1, fires[-1]) if fires and spread else []
    except ValidationError as e:
        raise ValidationError(_PREVIEW_PARAMS.get(e.field, e.field), e.reason) from None
    dues = spread_fires(job, fires, spread, following[0] if following else None)
    return FiresRead.of(fires, tz, dues)
