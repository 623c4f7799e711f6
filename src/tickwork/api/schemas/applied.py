"""The answer of ``PUT /jobs/{name}``: the job, and what applying its definition did."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tickwork.api.schemas.read import JobRead
from tickwork.app.apply import Applied, ApplyOutcome


class JobApplied(BaseModel):
    """``created`` (201), ``updated`` or ``unchanged`` (200), with the job as it is now."""

    outcome: ApplyOutcome = Field(description="`created`, `updated` or `unchanged`.")
    job: JobRead

    @classmethod
    def of(cls, applied: Applied) -> JobApplied:
        return cls(outcome=applied.outcome, job=JobRead.model_validate(applied.job))
