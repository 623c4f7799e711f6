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
from enum import StrEnum
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


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which live jobs ``list_jobs`` returns. ``None`` means "any"."""

    name_prefix: str | None = None
    tag: str | None = None
    paused: bool | None = None
    schedule_kind: str | None = None


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Bounds for ``list_runs``: ``*_from`` inclusive, ``*_to`` exclusive; ``None``: open."""

    logical_from: datetime | None = None
    logical_to: datetime | None = None
    started_from: datetime | None = None
    started_to: datetime | None = None


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    """Dead-lettered (``failed``) task runs, newest first; ``next_cursor`` for the next page."""

    task_runs: list[TaskRun]
    next_cursor: str | None


class Scope(StrEnum):
    """What an API token may do. Each scope includes the ones before it."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def allows(self, needed: Scope) -> bool:
        order = list(Scope)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A bearer token as stored: only the SHA-256 of its secret, never the secret."""

    id: str
    name: str
    scope: Scope
    secret_hash: str
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """A remembered ``Idempotency-Key``: the hash of its request and the response stored.

    ``status`` and ``body`` are None only in a row that an older tickwork claimed before its
    write ran (it claimed keys in a transaction of their own); such a row stays until it
    expires.
    """

    request_hash: str
    status: int | None
    body: str | None


@dataclass(frozen=True, slots=True)
class KeyReceipt:
    """An ``Idempotency-Key`` and the response of the write it guards, recorded by that
    write's own transaction: the key is kept if and only if the write commits."""

    token_id: str
    key: str
    request_hash: str
    status: int
    body: str
    created_at: datetime
    expires_at: datetime


class KeyTaken(Exception):
    """A write carried a ``KeyReceipt`` whose key a live record holds: nothing was written.

    ``held`` is that record, to replay (same request) or to refuse (another request).
    """

    def __init__(self, held: IdempotencyRecord) -> None:
        super().__init__("the idempotency key is recorded already")
        self.held = held


class TokenStore(Protocol):
    """API tokens. Names are unique among tokens that are not revoked."""

    async def create_token(self, token: ApiToken) -> None:
        """Insert a token; ``Conflict("name", ...)`` if a live token has its name."""

    async def get_token(self, token_id: str) -> ApiToken | None:
        """The token with this id, revoked or not."""

    async def list_tokens(self) -> list[ApiToken]:
        """Every token, revoked ones included, oldest first."""

    async def revoke_token(self, id_or_name: str, now: datetime) -> ApiToken | None:
        """Revoke the live token with this id or name; None if there is none."""

    async def touch_token(self, token_id: str, now: datetime) -> None:
        """Record that the token was used at ``now``."""


class IdempotencyStore(Protocol):
    """``Idempotency-Key`` records, per token. The (token, key) pair is the lock.

    Keys are written only by the writes they guard (``Store.create_jobs`` and
    ``Store.create_runs`` take a ``KeyReceipt``), in the same transaction; here they are read
    and purged.
    """

    async def get_key(self, token_id: str, key: str, now: datetime) -> IdempotencyRecord | None:
        """The record of this key if it has not expired at ``now``."""

    async def purge_keys(self, now: datetime) -> int:
        """Delete keys that expired at or before ``now``; returns how many."""


@dataclass(frozen=True, slots=True)
class Materialization:
    """The runs of one job's due cron fires and where its schedule goes next."""

    job_id: str
    expected_next: datetime
    new_next: datetime | None
    runs: Sequence[NewRun]


class Store(TokenStore, IdempotencyStore, Protocol):
    """Durable state: jobs, runs, task runs, attempts and logs. The source of truth."""

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (Alembic ``upgrade head``)."""

    async def close(self) -> None: ...

    # -- jobs --------------------------------------------------------------------------
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
        copy of their tasks.
        """

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

    async def materialize_many(self, items: Sequence[Materialization]) -> list[TaskRun]:
        """``materialize`` for many jobs in one transaction; each item stays conditional.

        The scheduler uses this so that many jobs firing at the same instant cost one
        transaction, not one each.
        """

    # -- runs --------------------------------------------------------------------------
    async def create_runs(self, runs: Sequence[NewRun], receipt: KeyReceipt | None = None) -> None:
        """Insert runs with their task runs (a manual trigger).

        Raises ``Conflict("logical_date", ...)`` if the job already has a run for one of the
        logical dates; then nothing is written. ``receipt``: as for ``create_jobs``.
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

    async def release(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> int:
        """running → queued, attempt unchanged, for task runs this worker claimed ahead and
        never started (it is draining). Nothing ran, so no attempt is recorded."""

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
