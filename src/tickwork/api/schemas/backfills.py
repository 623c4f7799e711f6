"""Backfill request and response bodies."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tickwork.api.schemas.instant import IsoInstant
from tickwork.app.backfills import BackfillPlan, BackfillView
from tickwork.core.backfill import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_ACTIVE,
    DEFAULT_PRIORITY,
    MAX_ACTIVE_LIMIT,
    Action,
    BackfillMode,
    BackfillSpec,
    BackfillState,
    Reprocess,
)
from tickwork.core.model import RunState
from tickwork.ports.backfills import BackfillDate


class BackfillCreate(BaseModel):
    """A backfill of ``job`` over the logical dates its schedule gives in ``[from, to]``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    job: str = Field(min_length=1, max_length=200)
    start: IsoInstant = Field(alias="from", description="The first logical date (inclusive).")
    end: IsoInstant = Field(alias="to", description="The last logical date (inclusive).")
    mode: BackfillMode = BackfillMode.PARALLEL
    max_active: int = Field(DEFAULT_MAX_ACTIVE, ge=1, le=MAX_ACTIVE_LIMIT)
    chunk_size: int = Field(DEFAULT_CHUNK_SIZE, ge=1, le=MAX_ACTIVE_LIMIT)
    reprocess: Reprocess = Field(
        Reprocess.NONE,
        description="`none`: only dates without a run; `failed`: also failed or cancelled "
        "runs; `all`: every date (a finished run gets one more attempt, its history kept).",
    )
    reverse: bool = Field(False, description="Newest date first.")
    priority: int = Field(
        DEFAULT_PRIORITY, ge=-1_000_000, le=1_000_000, description="Of its task runs."
    )

    def to_spec(self) -> BackfillSpec:
        return BackfillSpec(
            job_name=self.job,
            start=self.start,
            end=self.end,
            mode=self.mode,
            max_active=self.max_active,
            chunk_size=self.chunk_size,
            reprocess=self.reprocess,
            reverse=self.reverse,
            priority=self.priority,
        )


class ProgressRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    total: int
    done: int
    succeeded: int
    failed: int
    skipped: int
    running: int
    remaining: int
    eta_seconds: float | None = Field(description="null until a run has finished.")


class BackfillRead(BaseModel):
    """A backfill and its progress."""

    id: str
    job_id: str
    job_name: str
    start: datetime = Field(serialization_alias="from")
    end: datetime = Field(serialization_alias="to")
    mode: BackfillMode
    max_active: int
    chunk_size: int
    reprocess: Reprocess
    reverse: bool
    priority: int
    state: BackfillState
    reason: str | None = Field(description="Why it paused or ended.")
    cursor: datetime | None = Field(description="The last date decided, in its order.")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    progress: ProgressRead

    @classmethod
    def of(cls, view: BackfillView) -> BackfillRead:
        b = view.backfill
        return cls(
            id=b.id,
            job_id=b.job_id,
            job_name=b.job_name,
            start=b.start,
            end=b.end,
            mode=b.mode,
            max_active=b.max_active,
            chunk_size=b.chunk_size,
            reprocess=b.reprocess,
            reverse=b.reverse,
            priority=b.priority,
            state=b.state,
            reason=b.reason,
            cursor=b.cursor,
            created_at=b.created_at,
            updated_at=b.updated_at,
            finished_at=b.finished_at,
            progress=ProgressRead.model_validate(view.progress),
        )


class BackfillListRead(BaseModel):
    backfills: list[BackfillRead]


class PlannedDateRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    logical_date: datetime
    action: Action
    run_id: str | None
    run_state: RunState | None


class BackfillPlanRead(BaseModel):
    """A dry run: what a backfill would do with each date (the first 10,000) and the total.
    Nothing is written."""

    job_name: str
    total: int
    dates: list[PlannedDateRead]

    @classmethod
    def of(cls, plan: BackfillPlan) -> BackfillPlanRead:
        dates = [PlannedDateRead.model_validate(d) for d in plan.dates]
        return cls(job_name=plan.job_name, total=plan.total, dates=dates)


class BackfillDateRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    logical_date: datetime
    run_id: str
    action: str
    outcome: str | None
    run_state: RunState | None


class BackfillDatesRead(BaseModel):
    dates: list[BackfillDateRead]

    @classmethod
    def of(cls, dates: list[BackfillDate]) -> BackfillDatesRead:
        return cls(dates=[BackfillDateRead.model_validate(d) for d in dates])
