"""Ports: the small interfaces the runtime depends on. Adapters implement them.

Every state change a store makes is a conditional update (``WHERE id = ? AND state = ? AND
attempt = ?``); a key that no longer matches is skipped silently, because it means another
actor (a worker, the reaper, a cancel) got there first. That is normal, not an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tickwork.core.model import (
    Job,
    LogChunk,
    NewRun,
    Outcome,
    Run,
    RunDetail,
    TaskRun,
)

#: (task_run_id, attempt): what a broker message carries and what conditional updates check.
TaskKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class RunPage:
    runs: list[Run]
    next_cursor: str | None


class Store(Protocol):
    """Durable state: jobs, runs, task runs, attempts and logs. The source of truth."""

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (Alembic ``upgrade head``)."""

    async def close(self) -> None: ...

    # -- jobs --------------------------------------------------------------------------
    async def create_jobs(self, items: Sequence[tuple[Job, Sequence[NewRun]]]) -> None:
        """Insert jobs, their tasks and their first runs in one transaction.

        Raises ``Conflict("name", ...)`` if a live job already has one of the names; then
        nothing is written.
        """

    async def get_job(self, name: str) -> Job | None:
        """The live (not deleted) job with this name."""

    async def list_jobs(self, *, limit: int = 100, after: str | None = None) -> list[Job]:
        """Live jobs ordered by name, starting after the name ``after``."""

    async def set_paused(self, job_id: str, paused: bool, now: datetime) -> bool:
        """Pause or resume a live job; False if it does not exist."""

    async def delete_job(self, job_id: str, now: datetime) -> list[TaskRun]:
        """Soft-delete a job (its history stays) and cancel its runs that have not finished.

        Returns the task runs that were running, so their workers can be told to stop.
        """

    async def due_cron_jobs(self, now: datetime, limit: int) -> list[Job]:
        """Live, unpaused cron jobs whose ``next_fire_at`` is at or before ``now``."""

    async def next_fire_at(self) -> datetime | None:
        """The earliest ``next_fire_at`` over live, unpaused cron jobs (for sleeping)."""

    async def materialize(
        self,
        job_id: str,
        expected_next: datetime,
        new_next: datetime | None,
        runs: Sequence[NewRun],
    ) -> list[TaskRun]:
        """Insert the runs of cron fires and advance the job's ``next_fire_at``, atomically.

        Conditional on the job's ``next_fire_at`` still being ``expected_next`` (else nothing
        is written and [] returned). A run whose (job, logical date) exists is skipped: that
        fire was already materialized. ``last_fire_at`` becomes the newest logical date in
        ``runs``. Returns the inserted task runs whose state is ``queued``, for publishing.
        """

    # -- runs --------------------------------------------------------------------------
    async def create_runs(self, runs: Sequence[NewRun]) -> None:
        """Insert runs with their task runs (a manual trigger).

        Raises ``Conflict("logical_date", ...)`` if the job already has a run for one of the
        logical dates; then nothing is written.
        """

    async def get_run(self, run_id: str) -> RunDetail | None: ...

    async def list_runs(
        self,
        *,
        job_id: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """Runs newest first (by logical date, then id), keyset-paginated by ``cursor``.

        ``state`` is a RunState value, or ``"dead"``: runs holding a dead-lettered
        (``failed``) task run.
        """

    async def cancel_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        """Cancel every unfinished task run of a run.

        Task runs at rest (pending/scheduled/queued/up_for_retry) become ``cancelled`` at
        once; running ones get ``cancel_requested`` and are returned, so their workers can be
        told to kill them (the worker then records ``cancelled``).
        """

    async def retry_run(self, run_id: str, now: datetime) -> list[TaskRun]:
        """Give every failed, upstream_failed or cancelled task run of a run one more attempt.

        Each becomes ``scheduled`` with ``due_at = now``, ``attempt + 1``, and its retry
        policy's ``max_attempts`` raised to that attempt. Returns the task runs changed.
        """

    # -- dispatch and execution --------------------------------------------------------
    async def due_task_runs(self, until: datetime, limit: int) -> list[TaskRun]:
        """Scheduled or up_for_retry task runs due at or before ``until``.

        Higher priority first; among equals, earlier due time first.
        """

    async def next_due_at(self) -> datetime | None:
        """The earliest ``due_at`` of a scheduled or up_for_retry task run."""

    async def mark_queued(self, keys: Sequence[TaskKey], now: datetime) -> list[TaskRun]:
        """scheduled|up_for_retry → queued, for the given keys. Returns the rows moved."""

    async def queued_task_runs(self, queued_before: datetime, limit: int) -> list[TaskRun]:
        """Task runs queued at or before ``queued_before`` that no worker has claimed."""

    async def claim(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> list[TaskRun]:
        """queued → running for the given keys (a worker takes them). Returns the rows won.

        A duplicate or stale message (wrong attempt, already claimed) claims nothing.
        """

    async def heartbeat(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[str]:
        """Refresh ``heartbeat_at`` of running task runs this worker holds.

        Returns the ids among them whose cancellation has been requested.
        """

    async def complete(self, outcomes: Sequence[Outcome]) -> list[str]:
        """Record finished attempts: running → outcome.state, conditional on attempt.

        Writes one attempt-history row per applied outcome; ``up_for_retry`` also sets
        ``due_at = retry_at`` and ``attempt + 1``. Updates the runs' derived states. Returns
        the ids of the task runs whose outcome was applied.
        """

    async def stale_running(self, heartbeat_before: datetime, limit: int) -> list[TaskRun]:
        """Running task runs whose last heartbeat is older than ``heartbeat_before`` (zombies)."""

    async def requeue(self, keys: Sequence[TaskKey], now: datetime) -> int:
        """queued → scheduled (due now) for keys a draining worker gives back."""

    # -- logs --------------------------------------------------------------------------
    async def append_logs(self, chunks: Sequence[LogChunk]) -> None: ...

    async def read_logs(
        self, task_run_id: str, *, after_seq: int = -1, limit: int = 1000
    ) -> list[LogChunk]:
        """Chunks with ``seq > after_seq``, in order."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A broker message: ids and the attempt only. Never enough to run anything by itself."""

    task_run_id: str
    attempt: int
    queue: str = "default"
    priority: int = 0


class Broker(Protocol):
    """Delivers task-run keys to workers. A speed-up only: the store is the record."""

    async def publish(self, deliveries: Sequence[Delivery]) -> None: ...

    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        """Up to ``max_items`` deliveries, higher priority first; waits up to ``timeout`` s."""

    async def close(self) -> None: ...


class LogSink(Protocol):
    """Where a runner writes captured output; buffered and flushed in batches by the worker."""

    def write(self, stream: str, data: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RunResult:
    """What executing one attempt produced."""

    ok: bool
    error: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    cancelled: bool = False


class Runner(Protocol):
    """Executes one attempt of one kind of task (shell, http, python)."""

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        """Run the attempt to the end, honouring ``task_run.timeout`` and ``cancel``.

        On timeout or when ``cancel`` is set, stop the work within one second (for shell:
        kill the process group) and return ``timed_out`` / ``cancelled``. Never raises for a
        failure of the task itself; that is ``ok=False`` with an ``error``.
        """
