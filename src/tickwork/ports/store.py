"""The ``Store`` port: durable state, the source of truth, and its parts by concept.

A consumer asks for the part it uses (a worker for ``ExecutionStore``, the scheduler for its
``SchedulerStore`` in ``scheduler/loop.py``); ``Store`` is every part together, as ``SqlStore``
implements it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from tickwork.core.model import (
    Job,
    LogChunk,
    NewRun,
    Outcome,
    RunDetail,
    TaskRun,
)
from tickwork.ports.alerts import AlertStore
from tickwork.ports.auth import IdempotencyStore, KeyReceipt, TokenStore
from tickwork.ports.backfills import BackfillStore
from tickwork.ports.coordination import (
    Fence,
    FenceStore,
    LeaseStore,
    PoolStore,
    WorkerRegistry,
)
from tickwork.ports.facts import FactsStore
from tickwork.ports.records import (
    Beat,
    Completion,
    DeadLetterPage,
    EnqueueEntry,
    JobFilter,
    Maintenance,
    Materialization,
    NextWork,
    RunCopy,
    RunFilter,
    RunPage,
    TaskKey,
    TimeWindow,
)
from tickwork.ports.secrets import SecretStore
from tickwork.ports.web import AuditLog, DashboardReads, WebSessionStore
from tickwork.ports.why import WhyStore


class JobStore(Protocol):
    """Jobs: the definitions the API writes and every process reads."""

    async def create_jobs(
        self, items: Sequence[tuple[Job, Sequence[NewRun]]], receipt: KeyReceipt | None = None
    ) -> None:
        """Insert jobs, their tasks and their first runs in one transaction.

        Raises ``Conflict("name", ...)`` if a live job already has one of the names; then
        nothing is written. With ``receipt``, its key and response are recorded first in the
        same transaction (an expired record of the key is replaced); if a live record holds
        the key, raises ``KeyTaken`` and writes nothing. Of concurrent writes with one key,
        exactly one commits.
        """

    async def get_job(self, name: str) -> Job | None:
        """The live (not deleted) job with this name."""

    async def history_job_id(self, name: str) -> str | None:
        """The id of the live job with this name, else of the job most recently deleted with
        it (whose runs, its history, stay); None if no job ever had the name."""

    async def list_jobs(
        self, *, limit: int = 100, after: str | None = None, where: JobFilter | None = None
    ) -> list[Job]:
        """Live jobs matching ``where``, ordered by name, starting after the name ``after``."""

    async def update_job(
        self,
        job: Job,
        expected_updated_at: datetime,
        reschedule: bool,
        runs: Sequence[NewRun] = (),
    ) -> bool:
        """Replace a live job's definition (row and tasks) and insert ``runs``, atomically.

        Conditional on ``updated_at`` still being ``expected_updated_at`` (else nothing is
        written and False returned). ``paused``, ``created_at`` and ``last_fire_at`` are kept
        as stored; ``next_fire_at`` is written only when ``reschedule``. A run whose (job,
        logical date) exists is skipped. Runs already created are not touched: they carry a
        copy of their tasks. Cron fires created ahead of time (not due yet) do not count as
        created: they are given back and planned again (see ``set_paused``).
        """

    async def set_paused(self, job_id: str, paused: bool, now: datetime) -> bool:
        """Pause or resume a live job; False if it does not exist.

        Pausing gives back the work of the job handed out ahead of time: task runs queued
        before their due instant go back to ``scheduled`` (a broker message for them then
        claims nothing), and cron fires created ahead are deleted, the job's next fire set
        back to the earliest of them. ``update_job`` gives back a cron job's fires created
        ahead the same way (they are planned again from the new definition), and
        ``delete_job`` deletes them.
        """

    async def delete_job(self, job_id: str, now: datetime) -> list[TaskRun]:
        """Soft-delete a job (its history stays) and cancel its runs that have not finished.

        Returns the task runs that were running, so their workers can be told to stop.
        """


class CronStore(Protocol):
    """Cron fires: what the scheduler materializes into runs."""

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
        *,
        fence: Fence | None = None,
    ) -> list[TaskRun]:
        """Insert the runs of cron fires and advance the job's ``next_fire_at``, atomically.

        Conditional on the job's ``next_fire_at`` still being ``expected_next`` (else nothing
        is written and [] returned). A run whose (job, logical date) exists is skipped: that
        fire was already materialized. ``last_fire_at`` becomes the newest logical date in
        ``runs``. Returns the inserted task runs whose state is ``queued``, for publishing.
        """

    async def materialize_many(
        self, items: Sequence[Materialization], *, fence: Fence | None = None
    ) -> list[TaskRun]:
        """``materialize`` for many jobs in one transaction; each item stays conditional.

        The scheduler uses this so that many jobs firing at the same instant cost one
        transaction, not one each.
        """


class RunStore(Protocol):
    """Runs and task runs as the API and the dashboard read and act on them."""

    async def create_runs(self, runs: Sequence[NewRun], receipt: KeyReceipt | None = None) -> None:
        """Insert runs with their task runs (a manual trigger).

        Raises ``Conflict("logical_date", ...)`` if the job already has a run for one of the
        logical dates; then nothing is written. ``receipt``: as for ``create_jobs``.
        """

    async def enqueue_runs(
        self,
        copies: Sequence[RunCopy],
        receipt: KeyReceipt | None = None,
        *,
        planned_from: Job | None = None,
    ) -> None:
        """Insert enqueued runs (``RunTrigger.ENQUEUE``) with their task runs, all or none, in
        one transaction; ``receipt``: as for ``create_jobs``. Enqueued runs may share a job
        and logical date. On PostgreSQL the rows go in with ``COPY``.

        With ``planned_from``, the transaction first checks that this job (id and
        ``updated_at``) is still the live one, and raises ``JobChanged`` (nothing written)
        if it was changed, paused, resumed or deleted since: the caller plans again.
        """

    async def enqueue_each(self, entries: Sequence[EnqueueEntry]) -> list[Exception | None]:
        """Insert the runs of several independent enqueues in one transaction (the API's
        group commit), each entry as ``enqueue_runs`` would insert it alone.

        Entries are checked one by one: one planned from a job that is no longer the live one
        is left out (its outcome ``JobChanged``), one whose receipt's key a live record holds
        is left out (``KeyTaken``); the others commit together. Returns each entry's outcome,
        None for written. Raises if the transaction failed: then nothing is written.
        """

    async def get_run(self, run_id: str) -> RunDetail | None: ...

    async def list_runs(
        self,
        *,
        job_id: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        window: TimeWindow | None = None,
        also: RunFilter | None = None,
    ) -> RunPage:
        """Runs newest first (by logical date, then id), keyset-paginated by ``cursor``.

        ``state`` is a RunState value, or ``"dead"``: runs holding a dead-lettered
        (``failed``) task run. ``window`` bounds the logical date and the start time.
        """

    async def dead_letters(
        self, *, job_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> DeadLetterPage:
        """Task runs that failed their last attempt, newest ``finished_at`` first."""

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

    async def replay_run(self, run_id: str, now: datetime) -> int:
        """Run a finished run again: every finished task run of it gets one more attempt
        (a skipped one keeps its attempt: it never ran), due now; the attempts so far stay
        in the history. Nothing changes unless the run has finished; ``NotFound`` for an
        unknown run. Returns how many task runs were re-armed.
        """

    async def get_task_run(self, task_run_id: str) -> TaskRun | None:
        """One task run by id, as stored."""

    async def cancel_task_run(self, task_run_id: str, now: datetime) -> list[TaskRun]:
        """``cancel_run`` for one task run: at rest (pending/scheduled/queued/up_for_retry) it
        becomes ``cancelled`` at once; running, it gets ``cancel_requested`` and is returned so
        its worker can be told. A finished one is left as it is ([]). Refreshes the run's
        derived state. Raises ``NotFound("task_run", ...)`` for an unknown id.
        """

    async def retry_task_run(self, task_run_id: str, now: datetime) -> list[TaskRun]:
        """``retry_run`` for one task run: if it is failed, upstream_failed or cancelled, it
        becomes ``scheduled`` (due ``now``, ``attempt + 1``, ``max_attempts`` raised to that
        attempt) and is returned; in any other state nothing changes ([]). Refreshes the
        run's derived state. Raises ``NotFound("task_run", ...)`` for an unknown id.
        """

    async def read_logs(
        self, task_run_id: str, *, after_seq: int = -1, limit: int = 1000
    ) -> list[LogChunk]:
        """Chunks with ``seq > after_seq``, in order."""


class DispatchStore(Protocol):
    """Handing due work out: what the scheduler's dispatch, window and reaper read and move."""

    async def due_task_runs(
        self, until: datetime, limit: int, *, after: datetime | None = None
    ) -> list[TaskRun]:
        """Scheduled or up_for_retry task runs of unpaused jobs due at or before ``until``
        (and after ``after``, when given: the hand-off ahead of time, which takes only task
        runs that no pool, ``depends_on_past`` or ``max_active_runs`` gates). A gated task run
        is left out while its gate is closed. Higher priority first; among equals the older
        logical date, then the earlier due time."""

    async def next_due_at(self) -> datetime | None:
        """The earliest ``due_at`` of a scheduled or up_for_retry task run."""

    async def next_work(self, after: datetime) -> NextWork:
        """In one read: ``next_fire_at``, ``next_due_at``, the earliest ``due_at`` after
        ``after`` of a task run ``due_task_runs(…, after=…)`` would return, and whether a
        backfill is running (``running_backfills``). What a scheduler pass looks at first, so
        that an idle pass costs one read."""

    async def mark_queued(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        """scheduled|up_for_retry → queued, for the given keys. Returns the rows moved."""

    async def queue_ahead(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        """scheduled|up_for_retry → queued before they are due (the sliding window), for the
        given keys of unpaused jobs. ``queued_at`` becomes the due instant (``now`` if it has
        passed): when a worker may claim them, and what the reconciler counts from. Pausing,
        changing or deleting the job gives such task runs back (see ``set_paused``)."""

    async def queued_task_runs(self, queued_before: datetime, limit: int) -> list[TaskRun]:
        """Task runs queued at or before ``queued_before`` that no worker has claimed
        (``queued_at``: when they became claimable; for work handed out ahead, its due
        instant)."""

    async def queued_counts(self, queued_before: datetime, limit: int) -> dict[str, int]:
        """How many of ``queued_task_runs(queued_before, limit)`` each queue has (no rows
        read: the reconciler's check before it reads them)."""

    async def stale_running(self, heartbeat_before: datetime, limit: int) -> list[TaskRun]:
        """Running task runs whose last heartbeat is older than ``heartbeat_before`` (zombies)."""

    async def requeue(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> int:
        """queued → scheduled (due now) for keys a draining worker gives back."""

    async def requeue_unstarted(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> list[TaskRun]:
        """running → queued, attempt unchanged, for task runs whose worker was lost while
        they were held unstarted (``started_at`` NULL, see ``heartbeat``): nothing ran, so
        no attempt is spent. Returns the rows moved (to publish again)."""


class CompletionStore(Protocol):
    """Recording finished attempts (a worker's outcomes, the reaper's verdicts)."""

    async def complete(
        self, outcomes: Sequence[Outcome], *, fence: Fence | None = None
    ) -> Completion:
        """Record finished attempts: running → outcome.state, conditional on attempt.

        Writes one attempt-history row per applied outcome (and a success's ``result``);
        ``up_for_retry`` also sets ``due_at = retry_at`` and ``attempt + 1``. Advances the
        runs' DAGs (downstream task runs become ready, skipped or upstream_failed) and updates
        their derived states, all in one transaction. See ``Completion``.
        """


class ExecutionStore(CompletionStore, Protocol):
    """What a worker needs of the store: claim, heartbeat, complete, give back, log."""

    async def claim(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> list[TaskRun]:
        """queued → running for the given keys (a worker takes them). Returns the rows won.

        A duplicate or stale message (wrong attempt, already claimed) claims nothing.
        """

    async def heartbeat(
        self,
        keys: Sequence[TaskKey],
        worker_id: str,
        now: datetime,
        *,
        held: Sequence[TaskKey] = (),
    ) -> Beat:
        """Refresh ``heartbeat_at`` of running task runs this worker holds.

        ``held``: those among ``keys`` claimed ahead that have not started; they are marked
        unstarted (``started_at`` NULL) until ``start`` is called for them, so the reaper
        gives them back without spending an attempt if this worker dies. A row another
        transaction holds may be skipped (not stamped, not marked) but is never reported
        abandoned. Returns which were cancelled and which this worker no longer holds.
        """

    async def start(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[TaskKey]:
        """Mark claimed task runs of ``worker_id`` as started (``started_at = now``) before a
        ``held`` one begins executing; returns the keys still held by this worker (the
        others were given back by the reaper and must not run)."""

    async def release(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> int:
        """running → queued, attempt unchanged, for task runs this worker claimed ahead and
        never started (it is draining). Nothing ran, so no attempt is recorded."""

    async def append_logs(self, chunks: Sequence[LogChunk]) -> None: ...


class HistoryStore(Protocol):
    """Housekeeping of the run history."""

    async def maintain_partitions(
        self, now: datetime, *, retention_days: int | None = None, ahead: int = 2
    ) -> Maintenance:
        """Housekeeping of the run history; safe to call often and from several processes.

        PostgreSQL: creates the monthly partitions of the month of ``now`` and ``ahead``
        months after it; with ``retention_days``, drops the months that end more than that
        many days before ``now``, never one that may still hold unfinished work. SQLite (no
        partitions): with ``retention_days``, deletes the finished runs made before the
        cutoff, with their task runs, attempts and logs, in bounded batches. ``None``: keep
        everything."""


class Store(
    TokenStore,
    IdempotencyStore,
    LeaseStore,
    FenceStore,
    PoolStore,
    WorkerRegistry,
    BackfillStore,
    AuditLog,
    WebSessionStore,
    DashboardReads,
    WhyStore,
    AlertStore,
    FactsStore,
    SecretStore,
    JobStore,
    CronStore,
    RunStore,
    DispatchStore,
    ExecutionStore,
    HistoryStore,
    Protocol,
):
    """Durable state: jobs, runs, task runs, attempts and logs. The source of truth.

    The writes a scheduler makes take ``fence``: with one, the write is made in full only if
    the fence holds its lease throughout the write's transaction; otherwise nothing is
    written and ``Fenced`` is raised. ``fence=None`` (embedded mode, workers, the API)
    writes as before, with no lease involved.
    """

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (Alembic ``upgrade head``)."""

    async def close(self) -> None: ...
