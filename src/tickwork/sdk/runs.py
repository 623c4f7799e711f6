"""Operations on runs: enqueue (task-queue style), search, detail, cancel, retry, logs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tickwork.sdk.calls import Call, idem, operation, seg
from tickwork.sdk.types import Enqueued, EnqueuedBatch, Logs, RunDetail, RunPage

#: The most runs one ``enqueue_many`` request carries (the API's limit).
MAX_ENQUEUE_BATCH = 5000


class RunOperations:
    """The run operations of both clients."""

    @operation
    def enqueue(
        name: str,
        params: Mapping[str, Any] | None = None,
        *,
        priority: int | None = None,
        delay: float | None = None,
        at: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[Enqueued]:
        """Enqueue one run of the job ``name`` with ``params`` (python tasks: extra kwargs;
        shell tasks: JSON in ``TICKWORK_PARAMS``), task-queue style: ``job.delay(...)``.

        ``priority`` (-100..100) applies to its tasks; ``delay`` (seconds) or ``at`` (ISO
        instant) make it wait. Returns ``{"run_id", "task_run_ids"}``.
        """
        given = {"params": params, "priority": priority, "delay": delay, "at": at}
        body = {k: v for k, v in given.items() if v is not None}
        path = f"/jobs/{seg(name)}/runs"
        return Call("POST", path, json=body, headers=idem(idempotency_key))

    @operation
    def enqueue_many(
        name: str,
        params: Iterable[Mapping[str, Any] | None],
        *,
        priority: int | None = None,
        idempotency_key: str | None = None,
    ) -> Call[EnqueuedBatch]:
        """Enqueue one run of the job ``name`` per item of ``params``, all in one request and
        one transaction (at most 5,000; split larger batches yourself). Returns
        ``{"run_ids": [...]}`` in the order of ``params``."""
        extra = {} if priority is None else {"priority": priority}
        items = [{"params": p, **extra} if p is not None else dict(extra) for p in params]
        path = f"/jobs/{seg(name)}/runs/batch"
        return Call("POST", path, json={"items": items}, headers=idem(idempotency_key))

    @operation
    def list_runs(
        *,
        job: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        logical_from: str | None = None,
        logical_to: str | None = None,
        started_from: str | None = None,
        started_to: str | None = None,
        trigger: str | None = None,
        tag: str | None = None,
    ) -> Call[RunPage]:
        """Runs newest first; ``state="dead"`` lists dead-lettered runs. ``*_from`` bounds
        (ISO instants) are inclusive, ``*_to`` exclusive; ``trigger`` why a run exists,
        ``tag`` a tag its job carries."""
        params = {
            "job": job,
            "state": state,
            "limit": limit,
            "cursor": cursor,
            "logical_from": logical_from,
            "logical_to": logical_to,
            "started_from": started_from,
            "started_to": started_to,
            "trigger": trigger,
            "tag": tag,
        }
        return Call("GET", "/runs", params=params)

    @operation
    def dead_letters(
        *, job: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Call[dict[str, Any]]:
        """Task runs that failed their last attempt, newest first (``task_runs``,
        ``next_cursor``); replay one with ``retry_run(run_id)``."""
        params = {"job": job, "limit": limit, "cursor": cursor}
        return Call("GET", "/dead-letters", params=params)

    @operation
    def get_run(run_id: str) -> Call[RunDetail]:
        return Call("GET", f"/runs/{seg(run_id)}")

    @operation
    def cancel_run(run_id: str) -> Call[RunDetail]:
        return Call("POST", f"/runs/{seg(run_id)}/cancel")

    @operation
    def retry_run(run_id: str) -> Call[RunDetail]:
        """Replay a run's failed (dead-lettered) or cancelled tasks."""
        return Call("POST", f"/runs/{seg(run_id)}/retry")

    @operation
    def replay_run(run_id: str) -> Call[RunDetail]:
        """Mark a finished run for replay: every task runs again, its history kept."""
        return Call("POST", f"/runs/{seg(run_id)}/replay")

    @operation
    def cancel_task_run(task_run_id: str) -> Call[RunDetail]:
        """Cancel one task of a run (a running one is killed by its worker); returns the run."""
        return Call("POST", f"/task-runs/{seg(task_run_id)}/cancel")

    @operation
    def retry_task_run(task_run_id: str) -> Call[RunDetail]:
        """Replay one failed, upstream-failed or cancelled task of a run; returns the run."""
        return Call("POST", f"/task-runs/{seg(task_run_id)}/retry")

    @operation
    def logs(
        run_id: str, *, task: str | None = None, after_seq: int = -1, limit: int = 1000
    ) -> Call[Logs]:
        """Output after ``after_seq``; poll with ``next_after_seq`` until ``finished``."""
        params = {"task": task, "after_seq": after_seq, "limit": limit}
        return Call("GET", f"/runs/{seg(run_id)}/logs", params=params)
