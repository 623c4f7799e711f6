"""Domain records: frozen dataclasses with aware UTC datetimes; changes return new ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from tickwork.core.params import NO_PARAMS, ParamsContract

JSON = dict[str, Any]


class ScheduleKind(StrEnum):
    NOW = "now"
    AT = "at"
    CRON = "cron"


class TaskKind(StrEnum):
    SHELL = "shell"
    HTTP = "http"
    PYTHON = "python"


class TriggerRule(StrEnum):
    """When a task with upstreams may run; the semantics are in ``tickwork.core.dag``."""

    ALL_SUCCESS = "all_success"
    ALL_FAILED = "all_failed"
    ALL_DONE = "all_done"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    NONE_FAILED = "none_failed"


class CallbackEvent(StrEnum):
    """When a callback fires: after an attempt that failed for good, succeeded, or will retry;
    or, for a whole run (job-level hooks only, see ``core.alerts``), when it missed its start
    deadline or its SLA."""

    ON_FAILURE = "on_failure"
    ON_SUCCESS = "on_success"
    ON_RETRY = "on_retry"
    ON_MISSED = "on_missed"
    ON_SLA_MISS = "on_sla_miss"


#: Events of a whole run, not of an attempt: a job may hook them, a task may not.
RUN_EVENTS = frozenset({CallbackEvent.ON_MISSED, CallbackEvent.ON_SLA_MISS})


@dataclass(frozen=True, slots=True)
class Callback:
    """A hook: an HTTP webhook (``config``: ``url``, optional ``headers``) or a python callable
    (``config``: ``target`` as ``module:function``). It never changes a run's outcome."""

    kind: TaskKind
    config: Mapping[str, Any]


#: Event -> hook. A task's own hooks win over its job's for the same event.
Callbacks = Mapping[CallbackEvent, Callback]


class TaskRunState(StrEnum):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    UP_FOR_RETRY = "up_for_retry"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"


class RunState(StrEnum):
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class RunTrigger(StrEnum):
    """Why a run exists."""

    SCHEDULE = "schedule"  # a cron fire or the instant of an `at` / `now` job
    MANUAL = "manual"  # `tickwork job trigger`
    CATCHUP = "catchup"  # a missed cron fire created on restart or resume (catchup=true)
    MISSED = "missed"  # a missed cron fire recorded as skipped (catchup=false)
    ENQUEUE = "enqueue"  # task-queue style: `POST /jobs/{name}/runs`; many per instant
    BACKFILL = "backfill"  # made (or re-run) by a backfill (core/backfill.py)


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a job runs: `now`, `at` an instant, or on a `cron` expression in an IANA zone."""

    kind: ScheduleKind
    at: datetime | None = None
    cron: str | None = None
    timezone: str = "UTC"
    start: datetime | None = None
    end: datetime | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a failed attempt is retried, and how long to wait in between.

    The delay before attempt ``n + 1`` is ``min(initial * multiplier ** (n - 1), maximum)``
    seconds, then spread by ``± jitter`` (a fraction) so retries of many tasks do not align.
    """

    max_attempts: int = 1
    initial_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 300.0
    jitter: float = 0.1


@dataclass(frozen=True, slots=True)
class Task:
    """One node of a job's DAG: what to execute, and the names of its upstream tasks.

    ``config`` by kind:
    - shell: ``argv`` (list of str) or, with ``shell: true``, ``command`` (str); ``env``; ``cwd``
    - http: ``method``, ``url``, ``headers``, ``body`` (str or JSON)
    - python: ``target`` (``module:function``), ``kwargs`` (JSON object)
    ``timeout`` and ``retry`` override the job's when set.
    """

    name: str
    kind: TaskKind
    config: Mapping[str, Any]
    upstream: tuple[str, ...] = ()
    timeout: float | None = None
    retry: RetryPolicy | None = None
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    priority: int | None = None  # None: the job's
    pool: str | None = None  # a named slot limit (``tickwork pool set``)
    pool_slots: int = 1  # slots of ``pool`` the task holds while queued or running
    callbacks: Callbacks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Job:
    """A named definition: schedule, tasks and policies."""

    id: str
    name: str
    schedule: Schedule
    tasks: tuple[Task, ...]
    created_at: datetime
    updated_at: datetime
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float | None = None
    queue: str = "default"
    priority: int = 0
    catchup: bool = False
    # Seconds a cron fire's run may be due after its logical date (core/jitter.py); None: the
    # fleet's ``cron_spread``; 0: never moved.
    jitter: float | None = None
    paused: bool = False
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    max_active_runs: int | None = None  # runs that may be unfinished at once; None: no limit
    depends_on_past: bool = False  # a task waits for itself in the previous run to succeed
    callbacks: Callbacks = field(default_factory=dict)  # defaults for every task
    params: ParamsContract = NO_PARAMS  # what trigger/enqueue callers may pass, and who
    # Seconds from a tick's logical date (core.alerts): by then its run must have started
    # (None: the default, DEFAULT_GRACE), and finished (None: no SLA).
    start_deadline: float | None = None
    sla: float | None = None
    # Cron bookkeeping, advanced in the same transaction that materializes a fire:
    next_fire_at: datetime | None = None  # the next cron fire not yet materialized (UTC)
    last_fire_at: datetime | None = None  # logical date of the newest materialized fire


@dataclass(frozen=True, slots=True)
class Pool:
    """A named limit on the slots that tasks declaring it hold while queued or running."""

    name: str
    slots: int
    description: str = ""


@dataclass(frozen=True, slots=True)
class Run:
    """One execution of a job for one logical date; unique per (job, logical date)."""

    id: str
    job_id: str
    job_name: str
    logical_date: datetime
    state: RunState
    trigger: RunTrigger
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TaskRun:
    """One task inside one run. ``attempt`` is the attempt being (or next to be) executed.

    The task's definition is copied in (``kind``, ``config``, ``timeout``, ``retry``) when the run
    is created, so changing a job never changes a run in flight.
    """

    id: str
    run_id: str
    job_id: str
    job_name: str
    task_name: str
    kind: TaskKind
    config: Mapping[str, Any]
    state: TaskRunState
    attempt: int
    retry: RetryPolicy
    due_at: datetime
    logical_date: datetime
    timeout: float | None = None
    queue: str = "default"
    priority: int = 0
    upstream: tuple[str, ...] = ()
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    worker_id: str | None = None
    error: str | None = None
    exit_code: int | None = None
    cancel_requested: bool = False
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    pool: str | None = None
    pool_slots: int = 1
    depends_on_past: bool = False
    callbacks: Callbacks = field(default_factory=dict)
    result: str | None = None  # the JSON text of what the task returned (size-limited)
    # Not stored: filled in when a worker claims the task run, the results of its upstreams
    # (task name -> decoded JSON), for ``{"$result": name}`` references in its config.
    inputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Attempt:
    """The history of one finished attempt of a task run."""

    task_run_id: str
    attempt: int
    state: TaskRunState
    started_at: datetime | None
    finished_at: datetime
    error: str | None = None
    exit_code: int | None = None
    worker_id: str | None = None


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run together with its task runs, inserted atomically."""

    run: Run
    task_runs: tuple[TaskRun, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one attempt, as a worker or the reaper records it.

    ``state`` is where the task run goes: ``success``, ``failed`` (dead-lettered),
    ``up_for_retry`` (with ``retry_at``), or ``cancelled``.
    """

    task_run_id: str
    attempt: int
    state: TaskRunState
    finished_at: datetime
    started_at: datetime | None = None
    retry_at: datetime | None = None
    error: str | None = None
    exit_code: int | None = None
    worker_id: str | None = None
    result: str | None = None  # JSON text, only with ``success``


@dataclass(frozen=True, slots=True)
class LogChunk:
    """A piece of a task run's captured output. ``seq`` orders chunks within a task run:
    attempt ``n`` numbers its chunks from ``(n - 1) << ATTEMPT_SHIFT`` (see ``first_seq``)."""

    task_run_id: str
    attempt: int
    seq: int
    stream: str  # "stdout" | "stderr" | "system"
    data: str
    created_at: datetime


#: Attempt ``n`` of a task run numbers its log chunks from ``(n - 1) << ATTEMPT_SHIFT``, so a
#: reader following with ``after_seq`` sees every attempt in order (2**20 chunks each).
ATTEMPT_SHIFT = 20


def first_seq(attempt: int) -> int:
    """The first log ``seq`` of ``attempt``; ``first_seq(attempt + 1) - 1`` is its last."""
    return (attempt - 1) << ATTEMPT_SHIFT


@dataclass(frozen=True, slots=True)
class RunDetail:
    """A run with every task run and every finished attempt."""

    run: Run
    task_runs: tuple[TaskRun, ...]
    attempts: tuple[Attempt, ...]
