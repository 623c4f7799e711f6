"""Operations on jobs: create, list, change, apply, delete, trigger, pause, resume, fires."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from tickwork.sdk.calls import Call, flag, idem, operation, seg
from tickwork.sdk.types import Fires, JobApplied, JobInfo, JobInput, JobPage, RunDetail

if TYPE_CHECKING:
    from tickwork.core.workflow_spec import WorkflowSpec
    from tickwork.sdk.workflow import Workflow


class JobOperations:
    """The job operations of both clients."""

    @operation
    def create_job(
        job: JobInput, *, allow_past: bool = False, idempotency_key: str | None = None
    ) -> Call[JobInfo]:
        """Create a job; a ``now`` job is queued at once. ``allow_past`` accepts a past ``at``.

        With ``idempotency_key``, sending the same request again (a retry after a timeout)
        returns the first answer instead of creating the job twice.
        """
        params = {"allow_past": flag(allow_past)}
        return Call("POST", "/jobs", json=job, params=params, headers=idem(idempotency_key))

    @operation
    def create_jobs(
        jobs: list[JobInput], *, allow_past: bool = False, idempotency_key: str | None = None
    ) -> Call[list[JobInfo]]:
        """Create up to 1000 jobs in one transaction: all of them or none."""
        params = {"allow_past": flag(allow_past)}
        body = {"jobs": jobs}
        return Call("POST", "/jobs/batch", json=body, params=params, headers=idem(idempotency_key))

    @operation
    def list_jobs(
        *,
        limit: int = 100,
        after: str | None = None,
        prefix: str | None = None,
        tag: str | None = None,
        paused: bool | None = None,
        schedule_kind: Literal["now", "at", "cron"] | None = None,
        queue: str | None = None,
        last_state: str | None = None,
    ) -> Call[JobPage]:
        """Jobs by name, filtered (``last_state``: the state of the job's newest run); pass
        the page's ``next_after`` as ``after`` for more."""
        params = {
            "limit": limit,
            "after": after,
            "prefix": prefix,
            "tag": tag,
            "paused": None if paused is None else str(paused).lower(),
            "schedule_kind": schedule_kind,
            "queue": queue,
            "last_state": last_state,
        }
        return Call("GET", "/jobs", params=params)

    @operation
    def update_job(
        name: str, changes: dict[str, Any], *, allow_past: bool = False
    ) -> Call[JobInfo]:
        """Change a job for its future runs (``PATCH``): only the fields in ``changes``."""
        params = {"allow_past": flag(allow_past)}
        return Call("PATCH", f"/jobs/{seg(name)}", json=changes, params=params)

    @operation
    def apply_job(
        job: JobInput | Workflow | WorkflowSpec, *, allow_past: bool = False
    ) -> Call[JobApplied]:
        """Create the job, or update it (for its future runs) when its definition differs, or
        change nothing when it is the same (``PUT /jobs/{name}``): the result's ``outcome``
        says ``created``, ``updated`` or ``unchanged``. ``job`` is an API job body, a
        ``@workflow`` function or a parsed definition (``tickwork.sdk.definitions``)."""
        body = job if isinstance(job, dict) else _definition_body(job)
        params = {"allow_past": flag(allow_past)}
        return Call("PUT", f"/jobs/{seg(body['name'])}", json=body, params=params)

    @operation
    def get_job(name: str) -> Call[JobInfo]:
        return Call("GET", f"/jobs/{seg(name)}")

    @operation
    def delete_job(name: str) -> Call[None]:
        """Delete a job; its unfinished runs are cancelled, its history stays."""
        return Call("DELETE", f"/jobs/{seg(name)}")

    @operation
    def trigger(
        name: str,
        logical_date: str | None = None,
        params: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Call[RunDetail]:
        """Run a job now by hand, for ``logical_date`` (ISO, default now), with ``params``
        (python tasks: extra kwargs; shell tasks: JSON in ``TICKWORK_PARAMS``)."""
        given = {"logical_date": logical_date, "params": params}
        body = {k: v for k, v in given.items() if v is not None} or None
        path = f"/jobs/{seg(name)}/trigger"
        return Call("POST", path, json=body, headers=idem(idempotency_key))

    @operation
    def pause(name: str) -> Call[JobInfo]:
        return Call("POST", f"/jobs/{seg(name)}/pause")

    @operation
    def resume(name: str) -> Call[JobInfo]:
        return Call("POST", f"/jobs/{seg(name)}/resume")

    @operation
    def upcoming(name: str, count: int = 10) -> Call[Fires]:
        """The job's next fire times."""
        return Call("GET", f"/jobs/{seg(name)}/upcoming", params={"count": count})

    @operation
    def preview(
        cron: str,
        tz: str = "UTC",
        count: int = 10,
        after: str | None = None,
        *,
        jitter: float = 0.0,
        job: str = "",
    ) -> Call[Fires]:
        """Fire times of a cron expression, and when their runs are due with ``jitter``
        seconds for the job named ``job``, computed by the server. Creates nothing."""
        params = {"cron": cron, "tz": tz, "count": count, "from": after}
        if jitter:
            params |= {"jitter": jitter, "job": job}
        return Call("GET", "/schedule/preview", params=params)


def _definition_body(job: Workflow | WorkflowSpec) -> Any:
    # Imported on use: definitions load the core and PyYAML, which plain API calls never need.
    from tickwork.sdk.definitions import job_body
    from tickwork.sdk.workflow import Workflow

    return job_body(job.parse() if isinstance(job, Workflow) else job)
