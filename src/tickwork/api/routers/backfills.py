"""Backfills: ``/backfills`` (create, dry run, list, show, dates, pause, resume, cancel).

The write routes need a ``write`` token, and, as saving the job would, ``admin`` when the job
runs code on workers (``shell`` or ``python`` tasks, ``python`` callbacks).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from tickwork.api.auth import TokenDep, require_job_scope
from tickwork.api.deps import ServicesDep
from tickwork.api.schemas.backfills import (
    BackfillCreate,
    BackfillDatesRead,
    BackfillListRead,
    BackfillPlanRead,
    BackfillRead,
)
from tickwork.api.schemas.instant import IsoInstant
from tickwork.app.services import Services
from tickwork.ports import ApiToken

write_router = APIRouter(tags=["backfills"])
read_router = APIRouter(tags=["backfills"])


async def _check_job(services: Services, token: ApiToken, name: str) -> None:
    job = await services.get_job(name)
    require_job_scope(token, job.tasks, [job.callbacks])


@write_router.post("/backfills", status_code=status.HTTP_201_CREATED)
async def create_backfill(
    body: BackfillCreate, services: ServicesDep, token: TokenDep
) -> BackfillRead:
    """Create a backfill; the scheduler creates its runs as it goes (trigger `backfill`,
    below live work). 409 names an unfinished backfill of the job over part of the range."""
    await _check_job(services, token, body.job)
    return BackfillRead.of(await services.backfills.create(body.to_spec()))


@write_router.post("/backfills/plan")
async def plan_backfill(
    body: BackfillCreate, services: ServicesDep, token: TokenDep
) -> BackfillPlanRead:
    """A dry run: the dates a backfill with this body would cover, which already have runs,
    and what it would do with each. Writes nothing."""
    await _check_job(services, token, body.job)
    return BackfillPlanRead.of(await services.backfills.plan(body.to_spec()))


@read_router.get("/backfills")
async def list_backfills(
    services: ServicesDep,
    job: Annotated[str | None, Query(description="Only this job's backfills.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> BackfillListRead:
    """Backfills, newest first, with their progress."""
    found = await services.backfills.list_backfills(job=job, limit=limit)
    return BackfillListRead(backfills=[BackfillRead.of(v) for v in found])


@read_router.get("/backfills/{backfill_id}")
async def get_backfill(backfill_id: str, services: ServicesDep) -> BackfillRead:
    """A backfill: done, running, failed and remaining dates, and an ETA from run durations."""
    return BackfillRead.of(await services.backfills.get(backfill_id))


@read_router.get("/backfills/{backfill_id}/dates")
async def backfill_dates(
    backfill_id: str,
    services: ServicesDep,
    after: Annotated[IsoInstant | None, Query(description="Dates after this one.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> BackfillDatesRead:
    """The dates the backfill has decided so far, with their runs, in logical-date order."""
    found = await services.backfills.dates(backfill_id, limit=limit, after=after)
    return BackfillDatesRead.of(found)


async def _check_backfill(services: Services, token: ApiToken, backfill_id: str) -> None:
    view = await services.backfills.get(backfill_id)
    job = await services.store.get_job(view.backfill.job_name)
    if job is not None:
        require_job_scope(token, job.tasks, [job.callbacks])


@write_router.post("/backfills/{backfill_id}/pause")
async def pause_backfill(backfill_id: str, services: ServicesDep, token: TokenDep) -> BackfillRead:
    """Start no more runs; the ones started go on. 409 unless it is running."""
    await _check_backfill(services, token, backfill_id)
    return BackfillRead.of(await services.backfills.pause(backfill_id))


@write_router.post("/backfills/{backfill_id}/resume")
async def resume_backfill(backfill_id: str, services: ServicesDep, token: TokenDep) -> BackfillRead:
    """Go on from where it paused. 409 unless it is paused."""
    await _check_backfill(services, token, backfill_id)
    return BackfillRead.of(await services.backfills.resume(backfill_id))


@write_router.post("/backfills/{backfill_id}/cancel")
async def cancel_backfill(
    backfill_id: str,
    services: ServicesDep,
    token: TokenDep,
    kill: Annotated[bool, Query(description="Stop its running runs too.")] = False,
) -> BackfillRead:
    """End the backfill: its runs not started yet are cancelled; running ones finish (with
    `kill`, their workers stop them within about a second). 409 if it has ended."""
    await _check_backfill(services, token, backfill_id)
    return BackfillRead.of(await services.backfills.cancel(backfill_id, kill=kill))
