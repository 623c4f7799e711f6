"""Response bodies. Built from core records (``from_attributes``), never from rows."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tickwork.api.schemas.callbacks import CallbacksRead, callbacks_plain
from tickwork.api.schemas.params import ParamsRead
from tickwork.app.records import JobPage, LogPage
from tickwork.core.alerts import DEFAULT_START_DEADLINE
from tickwork.core.model import (
    RunDetail,
    RunState,
    RunTrigger,
    ScheduleKind,
    TaskKind,
    TaskRun,
    TaskRunState,
    TriggerRule,
)
from tickwork.ports import RunPage
from tickwork.security.masking import mask_config, mask_json, mask_text


class _Read(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# Every answer that shows a config, an error or output masks what looks secret
# (``security.masking``); ``{"$secret": NAME}`` references show as they are.
def masked_config(config: dict[str, Any]) -> dict[str, Any]:
    return mask_config(config)


def masked_json(value: dict[str, Any]) -> dict[str, Any]:
    masked: dict[str, Any] = mask_json(value)
    return masked


def masked_text(text: str | None) -> str | None:
    return None if text is None else mask_text(text)


class ScheduleRead(_Read):
    kind: ScheduleKind
    at: datetime | None
    cron: str | None
    timezone: str
    start: datetime | None
    end: datetime | None


class RetryRead(_Read):
    max_attempts: int
    initial_delay: float
    multiplier: float
    max_delay: float
    jitter: float


class TaskRead(_Read):
    name: str
    kind: TaskKind
    config: dict[str, Any] = Field(description="The kind's fields (argv, url, target, ...).")
    upstream: list[str]
    timeout: float | None
    retry: RetryRead | None
    trigger_rule: TriggerRule
    priority: int | None = Field(description="null: the job's priority.")
    pool: str | None
    pool_slots: int
    callbacks: CallbacksRead

    _plain_callbacks = field_validator("callbacks", mode="before")(callbacks_plain)
    _masked = field_validator("config", mode="after")(masked_config)


class JobRead(_Read):
    """A job as stored, with its cron bookkeeping."""

    id: str
    name: str
    schedule: ScheduleRead
    tasks: list[TaskRead]
    retry: RetryRead
    timeout: float | None
    queue: str
    priority: int
    catchup: bool
    jitter: float | None = Field(description="Cron only: seconds fires are spread over.")
    paused: bool
    tags: list[str]
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    max_active_runs: int | None = Field(description="Unfinished runs at once; null: no limit.")
    depends_on_past: bool
    callbacks: CallbacksRead
    next_fire_at: datetime | None = Field(description="Next cron fire not yet materialized.")
    last_fire_at: datetime | None = Field(description="Logical date of the newest cron fire.")
    params: ParamsRead = Field(description="Params trigger/enqueue may pass, and who may.")
    start_deadline: float | None = Field(
        None, description="Seconds after its logical date a tick's run must have started by "
        f"(else `on_missed`); null: the default, {DEFAULT_START_DEADLINE:g}."
    )  # fmt: skip
    sla: float | None = Field(
        None, description="Seconds after its logical date a tick's run must have finished by "
        "(else `on_sla_miss`); null: no SLA."
    )  # fmt: skip

    _plain_callbacks = field_validator("callbacks", mode="before")(callbacks_plain)
    _masked = field_validator("metadata", mode="after")(masked_json)


class JobPageRead(BaseModel):
    """Jobs by name; pass ``next_after`` as ``after`` for the next page (null: no more)."""

    jobs: list[JobRead]
    next_after: str | None

    @classmethod
    def of(cls, page: JobPage) -> JobPageRead:
        return cls(jobs=[JobRead.model_validate(j) for j in page.jobs], next_after=page.next_after)


class RunRead(_Read):
    """One execution of a job for one logical date."""

    id: str
    job_id: str
    job_name: str
    logical_date: datetime
    state: RunState
    trigger: RunTrigger
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class TaskRunRead(_Read):
    """One task of a run. ``state: failed`` means dead-lettered (retry the run to replay)."""

    id: str
    task_name: str
    kind: TaskKind
    config: dict[str, Any]
    state: TaskRunState
    attempt: int
    retry: RetryRead
    due_at: datetime
    timeout: float | None
    queue: str
    priority: int
    upstream: list[str]
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    worker_id: str | None
    error: str | None
    exit_code: int | None
    cancel_requested: bool
    trigger_rule: TriggerRule
    pool: str | None
    pool_slots: int
    result: Any = Field(None, description="What the task returned (JSON), once it succeeded.")

    _masked = field_validator("config", mode="after")(masked_config)
    _masked_error = field_validator("error", mode="after")(masked_text)

    @model_validator(mode="before")
    @classmethod
    def _decode_result(cls, data: Any) -> Any:
        # The store keeps a result as JSON text; show it as the JSON it is.
        if isinstance(data, TaskRun) and data.result is not None:
            return replace(data, result=_decoded(data.result))
        return data


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON after all: show the text rather than lose it


class AttemptRead(_Read):
    """A finished attempt of a task run."""

    task_run_id: str
    attempt: int
    state: TaskRunState
    started_at: datetime | None
    finished_at: datetime
    error: str | None
    exit_code: int | None
    worker_id: str | None

    _masked_error = field_validator("error", mode="after")(masked_text)


class RunDetailRead(RunRead):
    """A run with all its task runs and their finished attempts."""

    task_runs: list[TaskRunRead]
    attempts: list[AttemptRead]

    @classmethod
    def of(cls, detail: RunDetail) -> RunDetailRead:
        run = RunRead.model_validate(detail.run).model_dump()
        return cls(
            **run,
            task_runs=[TaskRunRead.model_validate(tr) for tr in detail.task_runs],
            attempts=[AttemptRead.model_validate(a) for a in detail.attempts],
        )


class RunPageRead(BaseModel):
    """Runs newest first; pass ``next_cursor`` as ``cursor`` for the next page."""

    runs: list[RunRead]
    next_cursor: str | None

    @classmethod
    def of(cls, page: RunPage) -> RunPageRead:
        runs = [RunRead.model_validate(r) for r in page.runs]
        return cls(runs=runs, next_cursor=page.next_cursor)


class LogChunkRead(_Read):
    attempt: int
    seq: int
    stream: str = Field(description="`stdout`, `stderr` or `system`.")
    data: str
    created_at: datetime

    _masked = field_validator("data", mode="after")(masked_text)


class LogsRead(_Read):
    """Output of one task run after ``after_seq``; poll again with ``next_after_seq``."""

    run_id: str
    task_run_id: str
    chunks: list[LogChunkRead]
    next_after_seq: int
    run_state: RunState
    finished: bool = Field(description="The run is over: no more output will come.")

    @classmethod
    def of(cls, page: LogPage) -> LogsRead:
        return cls.model_validate(page)


class FireRead(BaseModel):
    """One fire time (the run's logical date), in UTC and in the schedule's zone, and when its
    run becomes due (later than ``utc`` only with a jitter or the fleet's cron_spread)."""

    utc: datetime
    local: datetime
    due: datetime

    @classmethod
    def of(cls, instant: datetime, zone: ZoneInfo, due: datetime | None = None) -> FireRead:
        return cls(utc=instant, local=instant.astimezone(zone), due=due or instant)


class FiresRead(BaseModel):
    """Upcoming fire times of a job, or of a cron expression (preview)."""

    timezone: str
    fires: list[FireRead]

    @classmethod
    def of(
        cls, instants: list[datetime], timezone: str, dues: list[datetime] | None = None
    ) -> FiresRead:
        zone = ZoneInfo(timezone)
        dues = dues or instants
        return cls(
            timezone=timezone,
            fires=[FireRead.of(i, zone, d) for i, d in zip(instants, dues, strict=True)],
        )


class HealthRead(BaseModel):
    status: str
    version: str
    schema_revision: str | None = None  # the database's Alembic revision
