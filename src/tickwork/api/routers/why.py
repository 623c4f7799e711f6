""" "Why isn't it running?": ``GET /runs/{id}/why`` and ``GET /jobs/{name}/why``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from tickwork.api.deps import ServicesDep
from tickwork.api.schemas.instant import IsoInstant
from tickwork.core.ledger import Tick, TickStatus
from tickwork.core.model import RunState
from tickwork.core.why import Reason

router = APIRouter(tags=["read"])


class ReasonRead(BaseModel):
    code: str
    message: str


class WhyRead(BaseModel):
    """Plain sentences, computed from the gates the scheduler and workers apply."""

    reasons: list[ReasonRead]

    @classmethod
    def of(cls, reasons: list[Reason]) -> WhyRead:
        return cls(reasons=[ReasonRead(code=r.code, message=r.message) for r in reasons])


@router.get("/runs/{run_id}/why")
async def why_run(run_id: str, services: ServicesDep) -> WhyRead:
    """Why the run is not running (or how it ended): not due until T, job paused,
    `max_active_runs`, a full pool and who holds it, `depends_on_past`, upstream tasks,
    retry backoff, a queue no live worker serves, busy workers, no scheduler leader."""
    return WhyRead.of(await services.why.run(run_id))


@router.get("/jobs/{name}/why")
async def why_job(name: str, services: ServicesDep) -> WhyRead:
    """Why the job is not running now: paused, ended, not due until T, no leader, then
    what holds its oldest unfinished run."""
    return WhyRead.of(await services.why.job(name))


class TickRead(BaseModel):
    logical_date: datetime
    status: TickStatus
    run_id: str | None
    run_state: RunState | None
    dst: str | None


class LedgerRead(BaseModel):
    """Every tick the schedule promised in the range, and what became of it."""

    ticks: list[TickRead]
    counts: dict[str, int]

    @classmethod
    def of(cls, ticks: list[Tick]) -> LedgerRead:
        counts: dict[str, int] = {}
        for t in ticks:
            counts[t.status.value] = counts.get(t.status.value, 0) + 1
        read = [
            TickRead(
                logical_date=t.logical_date,
                status=t.status,
                run_id=t.run_id,
                run_state=t.run_state,
                dst=t.dst,
            )
            for t in ticks
        ]
        return cls(ticks=read, counts=counts)


@router.get("/jobs/{name}/ledger")
async def job_ledger(
    name: str,
    services: ServicesDep,
    start: Annotated[IsoInstant, Query(alias="from", description="First instant (inclusive).")],
    end: Annotated[IsoInstant, Query(alias="to", description="Last instant (inclusive).")],
) -> LedgerRead:
    """Every tick the job's cron schedule promised in `[from, to]` (10,000 at most),
    computed from the schedule itself, matched with what happened: `ran`, `backfilled`,
    `skipped`, `paused`, `missed`, `due`, `upcoming`, `before_start`, `after_end`; `dst`
    names the daylight-saving rule applied (`gap`, `fold`, `fold_twice`)."""
    return LedgerRead.of(await services.ledger.ledger(name, start, end))
