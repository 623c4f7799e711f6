""" "Why isn't it running?": ``GET /runs/{id}/why`` and ``GET /jobs/{name}/why``."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from tickwork.api.deps import ServicesDep
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
