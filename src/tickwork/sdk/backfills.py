"""Operations on backfills: create (or dry-run), list, show, dates, pause, resume, cancel."""

from __future__ import annotations

from typing import Literal, TypedDict

from tickwork.sdk.calls import Call, flag, operation, seg

Mode = Literal["sequential", "parallel", "chunked"]
ReprocessRule = Literal["none", "failed", "all"]


class BackfillProgress(TypedDict):
    total: int
    done: int
    succeeded: int
    failed: int
    skipped: int
    running: int
    remaining: int
    eta_seconds: float | None


class BackfillInfo(TypedDict):
    """A backfill as the API returns it (``from`` and ``to``: its inclusive range)."""

    id: str
    job_id: str
    job_name: str
    mode: Mode
    max_active: int
    chunk_size: int
    reprocess: ReprocessRule
    reverse: bool
    priority: int
    state: Literal["running", "paused", "completed", "cancelled"]
    reason: str | None
    cursor: str | None
    created_at: str
    updated_at: str
    finished_at: str | None
    progress: BackfillProgress


class BackfillList(TypedDict):
    backfills: list[BackfillInfo]


class PlannedDate(TypedDict):
    logical_date: str
    action: Literal["create", "rerun", "track", "skip"]
    run_id: str | None
    run_state: str | None


class BackfillPlan(TypedDict):
    job_name: str
    total: int
    dates: list[PlannedDate]


class BackfillDate(TypedDict):
    logical_date: str
    run_id: str
    action: str
    outcome: str | None
    run_state: str | None


class BackfillDates(TypedDict):
    dates: list[BackfillDate]


class BackfillOperations:
    """The backfill operations of both clients."""

    @operation
    def create_backfill(
        job: str,
        start: str,
        end: str,
        *,
        mode: Mode = "parallel",
        max_active: int | None = None,
        chunk_size: int | None = None,
        reprocess: ReprocessRule = "none",
        reverse: bool = False,
        priority: int | None = None,
    ) -> Call[BackfillInfo]:
        """Backfill ``job`` over the logical dates its schedule gives in ``[start, end]``
        (ISO instants, inclusive); the server creates its runs as it goes. To see what it
        would do first, ``plan_backfill``."""
        given = {
            "job": job,
            "from": start,
            "to": end,
            "mode": mode,
            "max_active": max_active,
            "chunk_size": chunk_size,
            "reprocess": reprocess,
            "reverse": reverse,
            "priority": priority,
        }
        body = {k: v for k, v in given.items() if v is not None}
        return Call("POST", "/backfills", json=body)

    @operation
    def plan_backfill(
        job: str, start: str, end: str, *, reprocess: ReprocessRule = "none", reverse: bool = False
    ) -> Call[BackfillPlan]:
        """A dry run: each date of the range, the run it has, and what a backfill would do."""
        body = {"job": job, "from": start, "to": end, "reprocess": reprocess, "reverse": reverse}
        return Call("POST", "/backfills/plan", json=body)

    @operation
    def list_backfills(*, job: str | None = None, limit: int = 50) -> Call[BackfillList]:
        """Backfills, newest first, with their progress."""
        return Call("GET", "/backfills", params={"job": job, "limit": limit})

    @operation
    def get_backfill(backfill_id: str) -> Call[BackfillInfo]:
        return Call("GET", f"/backfills/{seg(backfill_id)}")

    @operation
    def backfill_dates(
        backfill_id: str, *, after: str | None = None, limit: int = 100
    ) -> Call[BackfillDates]:
        """The dates decided so far, with their runs, in logical-date order."""
        params = {"after": after, "limit": limit}
        return Call("GET", f"/backfills/{seg(backfill_id)}/dates", params=params)

    @operation
    def pause_backfill(backfill_id: str) -> Call[BackfillInfo]:
        return Call("POST", f"/backfills/{seg(backfill_id)}/pause")

    @operation
    def resume_backfill(backfill_id: str) -> Call[BackfillInfo]:
        return Call("POST", f"/backfills/{seg(backfill_id)}/resume")

    @operation
    def cancel_backfill(backfill_id: str, *, kill: bool = False) -> Call[BackfillInfo]:
        """Cancel: runs not started are cancelled; running ones finish unless ``kill``."""
        return Call("POST", f"/backfills/{seg(backfill_id)}/cancel", params={"kill": flag(kill)})
