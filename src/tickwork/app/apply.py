"""Apply a job definition by name: create it, update it, or leave it as it is.

``tickwork job apply etl.yaml`` and ``Client.apply_job`` both end here (``PUT /jobs/{name}``),
so applying the same definition twice changes nothing the second time, from either edge. An
update is a ``PATCH`` of every definition field: it applies to future runs only, and keeps
the job's identity, history and pause state.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tickwork.app.job_changes import UPDATABLE_FIELDS, changed_job
from tickwork.app.records import JobSpec
from tickwork.app.services import Services
from tickwork.core.model import Job


class ApplyOutcome(StrEnum):
    """What applying a definition did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Applied:
    job: Job
    outcome: ApplyOutcome


async def apply_job(services: Services, spec: JobSpec, *, allow_past: bool = False) -> Applied:
    """Create the job ``spec.name`` if there is none; otherwise update it when its definition
    differs from ``spec`` (as validated: ``get`` and ``GET`` are the same method), and write
    nothing when it does not."""
    current = await services.store.get_job(spec.name)
    if current is None:
        job = await services.create_job(spec, allow_past=allow_past)
        return Applied(job, ApplyOutcome.CREATED)
    changes = definition_of(spec)
    candidate, _ = changed_job(current, changes, services.now(), allow_past=allow_past)
    if _definition(candidate) == _definition(current):
        return Applied(current, ApplyOutcome.UNCHANGED)
    job = await services.update_job(spec.name, changes, allow_past=allow_past)
    return Applied(job, ApplyOutcome.UPDATED)


def definition_of(spec: JobSpec) -> dict[str, Any]:
    """The fields of ``spec`` a definition sets, as ``update_job`` changes."""
    return {name: getattr(spec, name) for name in sorted(UPDATABLE_FIELDS)}


def _definition(job: Job) -> tuple[Any, ...]:
    return tuple(getattr(job, name) for name in sorted(UPDATABLE_FIELDS))
