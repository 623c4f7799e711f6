"""Ports: the small interfaces the runtime depends on. Adapters implement them.

Every state change a store makes is a conditional update (``WHERE id = ? AND state = ? AND
attempt = ?``); a key that no longer matches is skipped silently, because it means another
actor (a worker, the reaper, a cancel) got there first. That is normal, not an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from tickwork.core.errors import TickworkError
from tickwork.core.model import (
    Job,
    LogChunk,
    NewRun,
    Outcome,
    Pool,
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
class Completion:
    """What ``Store.complete`` did.

    ``queued``: downstream task runs that the outcomes made ready, queued in the same
    transaction; the caller publishes them at once (no scheduler round trip per DAG edge).
    ``waiting``: how many were made ready but left ``scheduled`` for the scheduler to admit
    (their pool, ``depends_on_past`` or a paused job decides when); wake it.
    """

    applied: list[str]
    queued: list[TaskRun] = field(default_factory=list)
    waiting: int = 0
    pools_freed: bool = False  # an applied outcome gave pool slots back


@dataclass(frozen=True, slots=True)
class PoolUsage:
    """A pool and the slots its queued and running task runs hold now."""

    pool: Pool
    used: int


class PoolStore(Protocol):
    """Pools: named slot limits that tasks declare (``pool``, ``pool_slots``)."""

    async def set_pool(self, pool: Pool, now: datetime) -> bool:
        """Create the pool or change its slots and description; True if it was created.
        Shrinking below the slots in use takes no slot back: no new task enters until the
        pool has room again."""

    async def delete_pool(self, name: str) -> bool:
        """Delete a pool; False if there is none. Task runs that declare it then wait until
        a pool of that name exists again."""

    async def list_pools(self) -> list[PoolUsage]:
        """Every pool, by name, with its slots in use."""

    async def get_pool(self, name: str) -> PoolUsage | None: ...


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process as registered: where it runs, what it takes, when it last spoke."""

    id: str
    hostname: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    running: int = 0  # task runs executing at its last heartbeat
    stopped_at: datetime | None = None  # set by a clean shutdown


class WorkerRegistry(Protocol):
    """Worker processes, for ``tickwork status``. Decides nothing (the reaper goes by each
    task run's own heartbeat)."""

    async def register_worker(self, worker: WorkerInfo) -> None:
        """Insert the worker (replacing a registration with its id)."""

    async def worker_heartbeat(
        self, worker_id: str, now: datetime, running: int, stopped: bool = False
    ) -> None:
        """Record that the worker is alive with ``running`` task runs (``stopped``: it is
        shutting down cleanly)."""

    async def list_workers(self, seen_since: datetime | None = None) -> list[WorkerInfo]:
        """Registered workers by id, optionally only those heard from since an instant."""

    async def forget_workers(self, seen_before: datetime) -> int:
        """Delete registrations not heard from since ``seen_before``; returns how many."""


@dataclass(frozen=True, slots=True)
class Fence:
    """A leader's proof of leadership, carried by its writes: a lease and the token it holds.

    A store checks it in the write's own transaction and refuses the whole write
    (``Fenced``) unless the lease still has this token and has not expired.
    """

    lease: str
    token: int


class Fenced(TickworkError):
    """A fenced write was refused: its token no longer holds the lease (another holder took
    it, or it expired). Nothing was written; the writer must stop acting as leader at once."""

    def __init__(self, fence: Fence) -> None:
        super().__init__(f"lease {fence.lease!r} is no longer held with token {fence.token}")
        self.fence = fence


@dataclass(frozen=True, slots=True)
class Lease:
    """A named lease as stored. ``token`` (the epoch) only ever increases: every new holder,
    and a holder taking back its own expired lease, gets a higher one."""

    name: str
    holder: str
    token: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime

    @property
    def fence(self) -> Fence:
        return Fence(self.name, self.token)


class LeaseStore(Protocol):
    """Named leases with fencing tokens (scheduler leadership).

    Expiry is judged on the database's clock where it has one (PostgreSQL), so the clocks of
    the processes competing do not matter; SQLite, which lives on one machine, uses that
    machine's clock. ``ttl`` is in seconds. A lease row is never deleted, so its token keeps
    increasing across holders, expiries and releases.
    """

    async def acquire_lease(self, name: str, holder: str, ttl: float) -> Lease | None:
        """Take the lease if it is free or expired (the token goes up by one), or renew it if
        ``holder`` still holds it (same token). None if another holder holds it. Atomic: of
        holders racing for a free lease, exactly one gets it."""

    async def renew_lease(self, name: str, holder: str, token: int, ttl: float) -> Lease | None:
        """Extend the lease to ``ttl`` from now, only if ``holder`` still holds it with
        ``token`` and it has not expired; else None (the holder has lost it)."""

    async def release_lease(self, name: str, holder: str, token: int) -> bool:
        """Let the lease expire now, if ``holder`` holds it with ``token``, so a standby can
        take it at once. False if it was not held so."""

    async def get_lease(self, name: str) -> Lease | None:
        """The lease as stored (maybe expired); None if it was never taken."""


@dataclass(frozen=True, slots=True)
class Materialization:
    """The runs of one job's due cron fires and where its schedule goes next."""

    job_id: str
    expected_next: datetime
    new_next: datetime | None
    runs: Sequence[NewRun]


class JobChanged(TickworkError):
    """The job runs were planned from is no longer the stored one (``enqueue_runs``)."""


@dataclass(frozen=True, slots=True)
class RunCopy:
    """An enqueued run, inserted as a copy of a planned ``template`` run (``enqueue_runs``).

    It has its own ids (``task_run_ids`` in the order of the template's task runs), its own
    task configs (the same objects as the template's where params do not change them) and,
    if set, its own priority for every task and its own due instant.
    """

    template: NewRun
    run_id: str
    task_run_ids: tuple[str, ...]
    configs: tuple[Mapping[str, Any], ...]
    priority: int | None = None
    due_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Maintenance:
    """What ``Store.maintain_partitions`` did, for the log.

    ``created``/``dropped``: partition names (PostgreSQL). ``kept``: months retention would
    have dropped, with the reason they stay. ``deleted_runs``: runs deleted row by row
    (SQLite retention).
    """

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    deleted_runs: int = 0

    def __bool__(self) -> bool:
        return bool(self.created or self.dropped or self.kept or self.deleted_runs)


class Store(TokenStore, IdempotencyStore, LeaseStore, PoolStore, WorkerRegistry, Protocol):
    """Durable state: jobs, runs, task runs, attempts and logs. The source of truth.

    The writes a scheduler makes take ``fence``: with one, the write is made in full only if
    the fence holds its lease throughout the write's transaction; otherwise nothing is
    written and ``Fenced`` is raised. ``fence=None`` (embedded mode, workers, the API)
    writes as before, with no lease involved.
    """

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

    # -- runs --------------------------------------------------------------------------
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

    async def claim(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> list[TaskRun]:
        """queued → running for the given keys (a worker takes them). Returns the rows won.

        A duplicate or stale message (wrong attempt, already claimed) claims nothing.
        """

    async def heartbeat(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> set[str]:
        """Refresh ``heartbeat_at`` of running task runs this worker holds.

        Returns the ids among them whose cancellation has been requested.
        """

    async def complete(
        self, outcomes: Sequence[Outcome], *, fence: Fence | None = None
    ) -> Completion:
        """Record finished attempts: running → outcome.state, conditional on attempt.

        Writes one attempt-history row per applied outcome (and a success's ``result``);
        ``up_for_retry`` also sets ``due_at = retry_at`` and ``attempt + 1``. Advances the
        runs' DAGs (downstream task runs become ready, skipped or upstream_failed) and updates
        their derived states, all in one transaction. See ``Completion``.
        """

    async def stale_running(self, heartbeat_before: datetime, limit: int) -> list[TaskRun]:
        """Running task runs whose last heartbeat is older than ``heartbeat_before`` (zombies)."""

    async def requeue(
        self, keys: Sequence[TaskKey], now: datetime, *, fence: Fence | None = None
    ) -> int:
        """queued → scheduled (due now) for keys a draining worker gives back."""

    async def release(self, keys: Sequence[TaskKey], worker_id: str, now: datetime) -> int:
        """running → queued, attempt unchanged, for task runs this worker claimed ahead and
        never started (it is draining). Nothing ran, so no attempt is recorded."""

    # -- history -----------------------------------------------------------------------
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

    # -- logs --------------------------------------------------------------------------
    async def append_logs(self, chunks: Sequence[LogChunk]) -> None: ...

    async def read_logs(
        self, task_run_id: str, *, after_seq: int = -1, limit: int = 1000
    ) -> list[LogChunk]:
        """Chunks with ``seq > after_seq``, in order."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A broker message: ids and the attempt only. Never enough to run anything by itself.

    ``receipt`` is the broker's id of the message as consumed (``None`` when publishing, and
    for a broker without one); ``ack`` needs it. It takes no part in equality.
    """

    task_run_id: str
    attempt: int
    queue: str = "default"
    priority: int = 0
    receipt: str | None = field(default=None, compare=False)


class Broker(Protocol):
    """Delivers task-run keys to workers. A speed-up only: the store is the record.

    Delivery is at least once: a message may arrive twice or late, and one may be lost
    (a Redis restart); the worker's conditional claim decides, and the scheduler re-sends
    what the store says is queued. So a broker that cannot reach its server logs and drops
    what it was given to publish or ack, and ``consume`` returns nothing until it can
    again; only ``depths`` raises (``BrokerUnavailable``).
    """

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        """Deliver now, in order: higher priority first; equal priority first in, first out."""

    async def publish_at(self, items: Sequence[tuple[Delivery, datetime]]) -> None:
        """Deliver each at its aware-UTC instant, never before; a past instant delivers now.

        A (task_run_id, attempt) published again while it still waits is delivered once,
        at the instant it was first given.
        """

    async def consume(
        self, queues: Sequence[str], max_items: int, timeout: float
    ) -> list[Delivery]:
        """Up to ``max_items`` deliveries, higher priority first; waits up to ``timeout`` s.

        A delivery stays this consumer's until acked; one a dead consumer never acked is
        delivered again to another (after a broker-specific idle time).
        """

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        """Forget consumed deliveries, once what they led to is durably written (the claim
        that lost, or the completion of the attempt that ran)."""

    async def depths(self) -> dict[str, int]:
        """Messages ready and not yet handed to a consumer, per queue (delayed ones not
        counted). For ``tickwork status``."""

    async def close(self) -> None: ...


class BrokerUnavailable(TickworkError):
    """The broker's server cannot be reached (raised by ``Broker.depths`` only)."""


class CancelSignals(Protocol):
    """Tells workers at once that the cancellation of a running attempt was requested.

    A speed-up only: the store's ``cancel_requested`` flag, which a worker's heartbeat
    reads, stays the record, so a signal lost to a broken connection delays a cancel by
    one heartbeat and no more.
    """

    async def request(self, keys: Sequence[TaskKey]) -> None:
        """Signal every listener now, and remember each key for a while, so that a listener
        that subscribes (or reconnects) later still sees it. Never raises for a lost
        connection (it logs)."""

    def listen(self, watching: Callable[[], Collection[TaskKey]]) -> AsyncIterator[list[TaskKey]]:
        """Yield requested keys as requests arrive, until the iteration is closed.

        On subscribing, and again after every reconnect, first yield the keys among
        ``watching()`` that were requested before (a late subscriber still sees them).
        Keys of attempts the listener does not run are passed on too; it ignores them.
        """

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
    result: Any = None  # what a python task returned (JSON-able); None: nothing


class Runner(Protocol):
    """Executes one attempt of one kind of task (shell, http, python)."""

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        """Run the attempt to the end, honouring ``task_run.timeout`` and ``cancel``.

        On timeout or when ``cancel`` is set, stop the work within one second (for shell:
        kill the process group) and return ``timed_out`` / ``cancelled``. Never raises for a
        failure of the task itself; that is ``ok=False`` with an ``error``.
        """
