"""Why a run or a job is not running, and the schedule ledger of a job."""

from __future__ import annotations

from typing import TypedDict

from tickwork.sdk.calls import Call, operation, seg


class Reason(TypedDict):
    code: str
    message: str


class Why(TypedDict):
    reasons: list[Reason]


class LedgerTick(TypedDict):
    logical_date: str
    status: str
    run_id: str | None
    run_state: str | None
    dst: str | None


class Ledger(TypedDict):
    ticks: list[LedgerTick]
    counts: dict[str, int]


class InsightOperations:
    """The "why" operations of both clients."""

    @operation
    def why_run(run_id: str) -> Call[Why]:
        """Why the run is not running (or how it ended), as plain sentences with codes."""
        return Call("GET", f"/runs/{seg(run_id)}/why")

    @operation
    def why_job(name: str) -> Call[Why]:
        """Why the job is not running now, and what holds its oldest unfinished run."""
        return Call("GET", f"/jobs/{seg(name)}/why")

    @operation
    def ledger(name: str, start: str, end: str) -> Call[Ledger]:
        """Every tick the job's schedule promised in ``[start, end]`` (ISO instants) and what
        became of it (``ran``, ``missed``, ``skipped``, ...)."""
        return Call("GET", f"/jobs/{seg(name)}/ledger", params={"from": start, "to": end})
