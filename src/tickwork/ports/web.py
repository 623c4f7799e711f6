"""What the dashboard and the audit log keep: audit entries, browser sessions, and the
read-only summaries the dashboard's pages are drawn from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from tickwork.core.model import LogChunk, Run, Schedule, TaskRun


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action someone took: who (token), what (``action`` on ``target``), when, from
    where (``source``: ``api`` or ``dashboard``), and whether it was allowed to go through."""

    id: str
    at: datetime
    token_id: str
    token_name: str
    source: str
    action: str
    target: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    outcome: str = "ok"


@dataclass(frozen=True, slots=True)
class AuditPage:
    entries: list[AuditEntry]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class WebSession:
    """A signed-in browser: the cookie holds a random secret whose SHA-256 is ``id``; the
    token it acts as is looked up (and its revocation honoured) on every request."""

    id: str
    token_id: str
    csrf: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """Queued task runs of one queue and priority lane, and when the oldest became claimable."""

    queue: str
    priority: int
    depth: int
    oldest_queued_at: datetime | None


@dataclass(frozen=True, slots=True)
class StateCount:
    state: str
    count: int


@dataclass(frozen=True, slots=True)
class CronJob:
    """What the calendar needs of a live cron job (no tasks: 2,000 jobs load in one query)."""

    name: str
    schedule: Schedule
    paused: bool
    next_fire_at: datetime


@dataclass(frozen=True, slots=True)
class ScheduleGroup:
    """Live cron jobs sharing one schedule: the calendar computes its fires once."""

    schedule: Schedule
    jobs: int
    active: int  # not paused


@dataclass(frozen=True, slots=True)
class RecentRun:
    """What a job's strip of recent runs shows of each."""

    id: str
    state: str
    logical_date: datetime


@dataclass(frozen=True, slots=True)
class GridColumn:
    """One run of a workflow and the state of each of its tasks, by task name."""

    run: Run
    cells: Mapping[str, tuple[str, str]]  # task name -> (task run id, state)


class AuditLog(Protocol):
    """The audit log: append-only, newest first when read."""

    async def record_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Append entries, in one transaction."""

    async def list_audit(
        self, *, limit: int = 50, cursor: str | None = None, token_name: str | None = None
    ) -> AuditPage:
        """Entries newest first, keyset-paged by ``cursor``; ``token_name`` filters."""

    async def last_audit(self, action: str, targets: Sequence[str]) -> AuditEntry | None:
        """The newest entry of ``action`` on any of ``targets`` (who cancelled a run)."""


class WebSessionStore(Protocol):
    """Dashboard sign-ins, kept in the database so every API process sees them."""

    async def create_web_session(self, session: WebSession) -> None: ...

    async def get_web_session(self, session_id: str, now: datetime) -> WebSession | None:
        """The session with this id if it has not expired at ``now``."""

    async def end_web_session(self, session_id: str, now: datetime) -> None:
        """Delete the session (sign-out), and any session that expired before ``now``."""


class DashboardReads(Protocol):
    """Bounded read queries the dashboard's pages need beyond the ``Store``'s own."""

    async def run_state_counts(self, since: datetime) -> list[StateCount]:
        """Runs created at or after ``since``, counted by state."""

    async def queue_depths(self) -> list[QueueDepth]:
        """Queued task runs per queue and priority lane."""

    async def failing_now(self, since: datetime, limit: int) -> list[TaskRun]:
        """Task runs that failed (or wait for a retry) at or after ``since``, newest first."""

    async def start_lateness(self, since: datetime, limit: int) -> list[float]:
        """Seconds between due and start of up to ``limit`` task runs started since ``since``."""

    async def recent_run_states(
        self, job_ids: Sequence[str], per_job: int
    ) -> dict[str, list[RecentRun]]:
        """The newest ``per_job`` runs of each job, newest first."""

    async def grid(self, job_id: str, runs: int) -> list[GridColumn]:
        """The newest ``runs`` runs of a job with their task runs' states, oldest first."""

    async def running_task_runs(self, limit: int) -> list[TaskRun]:
        """Task runs running now, by worker."""

    async def pool_waiting(self) -> dict[str, int]:
        """Scheduled task runs waiting for each pool."""

    async def dead_letter_count(self, cap: int) -> int:
        """Dead-lettered task runs, counted up to ``cap`` (a capped count never scans history)."""

    async def cron_schedules_firing_before(self, until: datetime) -> list[ScheduleGroup]:
        """The schedules of the live cron jobs whose next fire is before ``until``, each with
        how many such jobs share it and how many of those are not paused (one row each)."""

    async def cron_jobs_of(self, schedules: Sequence[Schedule], until: datetime) -> list[CronJob]:
        """Of the live cron jobs whose next fire is before ``until``, those on ``schedules``,
        by name."""

    async def log_tail(self, task_run_id: str, limit: int) -> list[LogChunk]:
        """The last ``limit`` log chunks of a task run, in order."""

    async def change_digest(self) -> tuple[Any, ...]:
        """A cheap fingerprint of what list pages show; it changes when runs start or end."""

    async def run_digest(self, run_id: str) -> tuple[Any, ...]:
        """A cheap fingerprint of one run: its task runs' states and attempts."""
