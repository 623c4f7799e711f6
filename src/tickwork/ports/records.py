"""Plain records the ports pass around: pages, filters, completions, pool usage, workers,
maintenance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.core.errors import TickworkError
from tickwork.core.model import (
    Job,
    NewRun,
    Pool,
    Run,
    TaskRun,
)
from tickwork.ports.auth import KeyReceipt

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
    queue: str | None = None
    last_state: str | None = None  # the state of the job's newest run (by logical date)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Bounds for ``list_runs``: ``*_from`` inclusive, ``*_to`` exclusive; ``None``: open."""

    logical_from: datetime | None = None
    logical_to: datetime | None = None
    started_from: datetime | None = None
    started_to: datetime | None = None


@dataclass(frozen=True, slots=True)
class RunFilter:
    """More bounds for ``list_runs``: the run's trigger, a tag its job carries."""

    trigger: str | None = None
    tag: str | None = None


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    """Dead-lettered (``failed``) task runs, newest first; ``next_cursor`` for the next page."""

    task_runs: list[TaskRun]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Completion:
    """What ``Store.complete`` did.

    ``queued``: downstream task runs that the outcomes made ready, queued in the same
    transaction; the caller publishes them at once (no scheduler round trip per DAG edge).
    ``waiting``: how many were made ready but left ``scheduled`` for the scheduler to admit
    (their pool, ``depends_on_past`` or a paused job decides when); wake it.
    ``runs_finished``: the runs these outcomes finished, counted by their final state.
    """

    applied: list[str]
    queued: list[TaskRun] = field(default_factory=list)
    waiting: int = 0
    pools_freed: bool = False  # an applied outcome gave pool slots back
    runs_finished: dict[str, int] = field(default_factory=dict)  # run state -> runs it ended


@dataclass(frozen=True, slots=True)
class Beat:
    """What ``Store.heartbeat`` answered.

    ``cancelled``: ids of the beaten task runs whose cancellation was requested.
    ``abandoned``: keys the worker sent that it no longer holds (the reaper failed or
    re-queued the attempt, or it finished): the worker must stop running them, since the
    store will refuse their outcome.
    """

    cancelled: set[str] = field(default_factory=set)
    abandoned: set[TaskKey] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class PoolUsage:
    """A pool and the slots its queued and running task runs hold now."""

    pool: Pool
    used: int


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
    kind: str = "worker"  # or "scheduler": a scheduler replica, registered for ``status``


@dataclass(frozen=True, slots=True)
class Materialization:
    """The runs of one job's due cron fires and where its schedule goes next."""

    job_id: str
    expected_next: datetime
    new_next: datetime | None
    runs: Sequence[NewRun]


@dataclass(frozen=True, slots=True)
class NextWork:
    """When the scheduler next has something to do, read at once (``DispatchStore.next_work``):
    the earliest cron fire (``next_fire_at``), the earliest due task run that may be queued
    (``next_due_at``), the earliest one after ``after`` that nothing but its time gates (what
    the window hands out ahead), and whether a backfill is running."""

    fire_at: datetime | None
    due_at: datetime | None
    ahead_at: datetime | None
    backfilling: bool


class JobChanged(TickworkError):
    """The job runs were planned from is no longer the stored one (``enqueue_runs``)."""


@dataclass(frozen=True, slots=True)
class RunCopy:
    """An enqueued run, inserted as a copy of a planned ``template`` run (``enqueue_runs``).

    It has its own ids (``task_run_ids`` in the order of the template's task runs), its own
    task configs (the same objects as the template's where params do not change them) and,
    if set, its own priority for every task, its own due instant and its own enqueue instant
    (``enqueued_at``: its logical date, creation instant, due instant unless ``due_at`` says
    otherwise, and queue instant for the task runs queued at once; a template planned once is
    shared by the enqueues of a job version, each with its own instant).
    """

    template: NewRun
    run_id: str
    task_run_ids: tuple[str, ...]
    configs: tuple[Mapping[str, Any], ...]
    priority: int | None = None
    due_at: datetime | None = None
    enqueued_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class EnqueueEntry:
    """One caller's enqueue among several written in one transaction (``enqueue_each``): its
    runs, the ``Idempotency-Key`` receipt recorded with them, and the job they were planned
    from (the write checks it is still the live one)."""

    copies: Sequence[RunCopy]
    receipt: KeyReceipt | None
    planned_from: Job


@dataclass(frozen=True, slots=True)
class Maintenance:
    """What ``Store.maintain_partitions`` did, for the log.

    ``created``/``dropped``: partition names (PostgreSQL). ``kept``: months retention would
    have dropped, with the reason they stay. ``deleted_runs``: runs deleted row by row
    (SQLite retention). ``deleted_alerts``: run alerts fired before the retention.
    """

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    deleted_runs: int = 0
    deleted_alerts: int = 0

    def __bool__(self) -> bool:
        return bool(
            self.created or self.dropped or self.kept or self.deleted_runs or self.deleted_alerts
        )
