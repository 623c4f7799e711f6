"""The typed dicts of the SDK: what its methods take (``*Input``) and return (``*Info``, ...).

Import them from ``tickwork.sdk``, which re-exports every one.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict

# -- inputs -----------------------------------------------------------------------------------


class ScheduleInput(TypedDict, total=False):
    """``{"kind": "now"}``, ``{"kind": "at", "at": ISO}`` or ``{"kind": "cron", "cron": ...}``."""

    kind: Required[Literal["now", "at", "cron"]]
    at: str
    cron: str
    timezone: str
    start: str
    end: str


class RetryInput(TypedDict, total=False):
    max_attempts: int
    initial_delay: float
    multiplier: float
    max_delay: float
    jitter: float


class CallbackInput(TypedDict, total=False):
    """A hook: ``{"kind": "http", "url": ..., "headers": {...}}`` or ``{"kind": "python",
    "target": "module:function"}`` (python ones need an admin token)."""

    kind: Required[Literal["http", "python"]]
    url: str
    headers: dict[str, str]
    target: str


#: Hooks by event: ``on_failure``, ``on_success``, ``on_retry``; a job's also ``on_missed``
#: (a tick's run not started within ``start_deadline``) and ``on_sla_miss`` (over ``sla``).
CallbacksInput = dict[
    Literal["on_failure", "on_success", "on_retry", "on_missed", "on_sla_miss"], CallbackInput
]

TriggerRuleName = Literal[
    "all_success", "all_failed", "all_done", "one_success", "one_failed", "none_failed"
]


class TaskInput(TypedDict, total=False):
    """One task. shell: ``argv`` or ``command`` + ``shell``, ``env``, ``cwd``; http: ``method``,
    ``url``, ``headers``, ``body``; python: ``target``, ``kwargs``. In a workflow: ``name``,
    ``upstream`` and ``trigger_rule``; ``pool`` and ``pool_slots`` limit concurrency."""

    kind: Required[Literal["shell", "http", "python"]]
    name: str
    upstream: list[str]
    timeout: float
    retry: RetryInput
    trigger_rule: TriggerRuleName
    priority: int
    pool: str
    pool_slots: int
    callbacks: CallbacksInput
    argv: list[str]
    command: str
    shell: bool
    env: dict[str, str]
    cwd: str
    method: str
    url: str
    headers: dict[str, str]
    body: str | dict[str, Any] | list[Any]
    target: str
    kwargs: dict[str, Any]


class JobInput(TypedDict):
    """A job to create (the API's ``JobCreate``)."""

    name: str
    schedule: ScheduleInput
    task: NotRequired[TaskInput]
    tasks: NotRequired[list[TaskInput]]
    retry: NotRequired[RetryInput]
    timeout: NotRequired[float]
    queue: NotRequired[str]
    priority: NotRequired[int]
    catchup: NotRequired[bool]
    jitter: NotRequired[float | None]
    tags: NotRequired[list[str]]
    metadata: NotRequired[dict[str, Any]]
    max_active_runs: NotRequired[int | None]
    depends_on_past: NotRequired[bool]
    callbacks: NotRequired[CallbacksInput]
    params: NotRequired[ParamsInput]
    start_deadline: NotRequired[float | None]  # seconds; None: the default (300)
    sla: NotRequired[float | None]  # seconds; None: no SLA


class ParamsInput(TypedDict):
    """A job's params contract: ``properties`` maps each param to a small JSON Schema
    (``type``, ``default``, ``enum``, bounds, ``pattern``, ``items``); ``required`` lists the
    names a caller must give; ``scope`` (``write``/``admin``) who may trigger or enqueue."""

    properties: NotRequired[dict[str, dict[str, Any]]]
    required: NotRequired[list[str]]
    scope: NotRequired[Literal["write", "admin"] | None]


# -- results ----------------------------------------------------------------------------------


class ScheduleInfo(TypedDict):
    kind: str
    at: str | None
    cron: str | None
    timezone: str
    start: str | None
    end: str | None


class RetryInfo(TypedDict):
    max_attempts: int
    initial_delay: float
    multiplier: float
    max_delay: float
    jitter: float


class TaskInfo(TypedDict):
    name: str
    kind: str
    config: dict[str, Any]
    upstream: list[str]
    timeout: float | None
    retry: RetryInfo | None
    trigger_rule: str
    priority: int | None
    pool: str | None
    pool_slots: int
    callbacks: dict[str, dict[str, Any]]


class JobInfo(TypedDict):
    id: str
    name: str
    schedule: ScheduleInfo
    tasks: list[TaskInfo]
    retry: RetryInfo
    timeout: float | None
    queue: str
    priority: int
    catchup: bool
    jitter: float | None
    paused: bool
    tags: list[str]
    metadata: dict[str, Any]
    max_active_runs: int | None
    depends_on_past: bool
    callbacks: dict[str, dict[str, Any]]
    params: ParamsInput
    created_at: str
    updated_at: str
    next_fire_at: str | None
    last_fire_at: str | None
    start_deadline: float | None
    sla: float | None


class JobApplied(TypedDict):
    """What ``apply_job`` did: ``created``, ``updated`` or ``unchanged``; the job as it is."""

    outcome: Literal["created", "updated", "unchanged"]
    job: JobInfo


class JobPage(TypedDict):
    jobs: list[JobInfo]
    next_after: str | None


class RunInfo(TypedDict):
    id: str
    job_id: str
    job_name: str
    logical_date: str
    state: str
    trigger: str
    created_at: str
    started_at: str | None
    finished_at: str | None


class TaskRunInfo(TypedDict):
    id: str
    task_name: str
    kind: str
    config: dict[str, Any]
    state: str
    attempt: int
    retry: RetryInfo
    due_at: str
    timeout: float | None
    queue: str
    priority: int
    upstream: list[str]
    queued_at: str | None
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    worker_id: str | None
    error: str | None
    exit_code: int | None
    cancel_requested: bool
    trigger_rule: str
    pool: str | None
    pool_slots: int
    result: Any


class AttemptInfo(TypedDict):
    task_run_id: str
    attempt: int
    state: str
    started_at: str | None
    finished_at: str
    error: str | None
    exit_code: int | None
    worker_id: str | None


class RunDetail(RunInfo):
    task_runs: list[TaskRunInfo]
    attempts: list[AttemptInfo]


class Enqueued(TypedDict):
    """One enqueued run: its id and its task runs' ids, in the job's task order."""

    run_id: str
    task_run_ids: list[str]


class EnqueuedBatch(TypedDict):
    """Enqueued runs' ids, in the order of the items sent."""

    run_ids: list[str]


class RunPage(TypedDict):
    runs: list[RunInfo]
    next_cursor: str | None


class LogChunk(TypedDict):
    attempt: int
    seq: int
    stream: str
    data: str
    created_at: str


class Logs(TypedDict):
    run_id: str
    task_run_id: str
    chunks: list[LogChunk]
    next_after_seq: int
    run_state: str
    finished: bool


class Fire(TypedDict):
    utc: str
    local: str
    due: str


class Fires(TypedDict):
    timezone: str
    fires: list[Fire]


class TokenInfo(TypedDict):
    id: str
    name: str
    scope: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


class TokenSecret(TokenInfo):
    secret: str


class SecretInfo(TypedDict):
    """A secret as listed: never its value."""

    name: str
    created_at: str
    updated_at: str


class PoolInfo(TypedDict):
    """A pool and the slots its queued and running tasks hold now."""

    name: str
    slots: int
    used: int
    description: str
