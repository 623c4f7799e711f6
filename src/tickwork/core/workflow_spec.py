"""Workflow definitions from plain data: what a YAML or JSON file (or ``@workflow``) gives.

    name: etl
    schedule: {kind: cron, cron: "0 2 * * *", timezone: Europe/Berlin}  # or "now", "0 2 * * *"
    catchup: false
    max_active_runs: 1
    callbacks: {on_failure: {kind: http, url: "https://hooks.example.org/etl"}}
    tasks:
      - name: extract_users
        kind: python
        target: mypkg.etl:extract_users
        pool: db
      - name: join
        kind: python
        target: mypkg.etl:join
        upstream: [extract_users]
        trigger_rule: all_success          # the default
        kwargs: {users: {$result: extract_users}}

A task holds the same fields as a task of the API: ``kind`` and its settings inline, ``name``,
``upstream``, ``trigger_rule``, ``timeout``, ``retry``, ``priority``, ``pool``, ``pool_slots``
and ``callbacks``. A config value ``{"$result": "<task>"}`` stands for the result of an
upstream task. Optional job fields: ``timeout``, ``retry``, ``queue``, ``priority``, ``tags``,
``metadata``, ``max_active_runs``, ``depends_on_past``, ``callbacks``.

Parsing is pure (no file reading, no YAML library here). It checks the shape of everything and
the meaning of every task and of the graph; the schedule's meaning (a valid cron expression,
an instant in the future) and the job's policies are checked when the workflow is applied, the
way every job is (``validate_job``), unless ``now`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from tickwork.core.alerts import alert_policy
from tickwork.core.errors import ValidationError
from tickwork.core.jitter import check_jitter
from tickwork.core.model import (
    Callbacks,
    RetryPolicy,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TriggerRule,
)
from tickwork.core.params import NO_PARAMS, ParamsContract, validate_contract
from tickwork.core.refs import RESULT_REF
from tickwork.core.retry import validate_retry
from tickwork.core.schedule import validate_schedule
from tickwork.core.validate import (
    validate_callbacks,
    validate_job_name,
    validate_max_active_runs,
    validate_tasks,
)

__all__ = ["RESULT_REF", "WorkflowSpec", "parse_workflow"]

_JOB_FIELDS = (
    "timeout",
    "retry",
    "queue",
    "priority",
    "tags",
    "metadata",
    "max_active_runs",
    "depends_on_past",
    "callbacks",
    "params",
    "start_deadline",
    "sla",
    "jitter",
)
_TOP_KEYS = frozenset(("name", "schedule", "catchup", "tasks", *_JOB_FIELDS))
_SCHEDULE_KINDS = frozenset(kind.value for kind in ScheduleKind)
_SCHEDULE_KEYS = frozenset({"kind", "at", "cron", "timezone", "start", "end"})
_TASK_FIELDS = frozenset(
    {
        "name",
        "kind",
        "upstream",
        "trigger_rule",
        "timeout",
        "retry",
        "priority",
        "pool",
        "pool_slots",
        "callbacks",
    }
)
_RETRY = RetryPolicy()
_RETRY_KEYS = ("max_attempts", "initial_delay", "multiplier", "max_delay", "jitter")


@dataclass(frozen=True, slots=True)
class WorkflowSpec:
    """A parsed workflow: a job definition whose tasks form a DAG."""

    name: str
    schedule: Schedule
    tasks: tuple[Task, ...]
    catchup: bool = False
    jitter: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float | None = None
    queue: str = "default"
    priority: int = 0
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    max_active_runs: int | None = None
    depends_on_past: bool = False
    callbacks: Callbacks = field(default_factory=dict)
    params: ParamsContract = NO_PARAMS
    start_deadline: float | None = None
    sla: float | None = None


def parse_workflow(data: object, *, now: datetime | None = None) -> WorkflowSpec:
    """Check a workflow definition and return it parsed; raise ``ValidationError(field,
    reason)`` naming the field (``tasks[2].upstream``) and the tasks involved.

    With ``now``, the schedule is validated (and normalized) as well.
    """
    if not isinstance(data, Mapping):
        raise ValidationError("workflow", "must be an object with name, schedule and tasks")
    _no_unknown_keys(data, _TOP_KEYS, "", "workflow")
    if "name" not in data:
        raise ValidationError("name", "is required: every workflow has a name")
    name = validate_job_name(data["name"])
    schedule = _schedule(data.get("schedule"))
    if now is not None:
        schedule = validate_schedule(schedule, now)
    return WorkflowSpec(
        name=name,
        schedule=schedule,
        tasks=_tasks(data.get("tasks")),
        catchup=_bool(data.get("catchup", False), "catchup"),
        jitter=check_jitter(data.get("jitter")),
        retry=validate_retry(_retry(data.get("retry", {}), "retry"), "retry"),
        timeout=_number_or_none(data.get("timeout"), "timeout"),
        queue=_str(data.get("queue", "default"), "queue"),
        priority=_int(data.get("priority", 0), "priority"),
        tags=tuple(_str_list(data.get("tags", []), "tags")),
        metadata=_mapping(data.get("metadata", {}), "metadata"),
        max_active_runs=validate_max_active_runs(data.get("max_active_runs")),
        depends_on_past=_bool(data.get("depends_on_past", False), "depends_on_past"),
        callbacks=validate_callbacks(data.get("callbacks", {}), "callbacks"),
        params=_params(data.get("params")),
        **_alert_fields(data),
    )


def _alert_fields(data: Mapping[str, Any]) -> dict[str, float | None]:
    """``start_deadline`` and ``sla`` in seconds, checked as the API checks them."""
    policy = alert_policy(data.get("start_deadline"), data.get("sla"))
    return {
        "start_deadline": None if policy.start_deadline is None else float(data["start_deadline"]),
        "sla": None if policy.sla is None else float(data["sla"]),
    }


def _params(data: object) -> ParamsContract:
    """A ``params`` contract as a definition file writes it (see ``core.params``)."""
    if data is None:
        return NO_PARAMS
    value = _mapping(data, "params")
    _no_unknown_keys(value, frozenset({"properties", "required", "scope"}), "params.", "params")
    contract = ParamsContract(
        _mapping(value.get("properties", {}), "params.properties"),
        tuple(_str_list(value.get("required", []), "params.required")),
        value.get("scope"),
    )
    return validate_contract(contract)


# -- schedule ----------------------------------------------------------------------------------


def _schedule(value: object) -> Schedule:
    if value is None:
        raise ValidationError("schedule", "is required: 'now', a cron expression or an object")
    if isinstance(value, str):
        if value.strip() == "now":
            return Schedule(kind=ScheduleKind.NOW)
        return Schedule(kind=ScheduleKind.CRON, cron=value)
    if not isinstance(value, Mapping):
        raise ValidationError(
            "schedule", "must be 'now', a cron expression, or an object with kind"
        )
    _no_unknown_keys(value, _SCHEDULE_KEYS, "schedule.", "schedule")
    kind = value.get("kind")
    if kind not in _SCHEDULE_KINDS:
        raise ValidationError(
            "schedule.kind", f"{kind!r} is not a schedule kind; use now, at or cron"
        )
    return Schedule(
        kind=ScheduleKind(kind),
        at=_instant(value.get("at"), "schedule.at"),
        cron=None if value.get("cron") is None else _str(value["cron"], "schedule.cron"),
        timezone=_str(value.get("timezone", "UTC"), "schedule.timezone"),
        start=_instant(value.get("start"), "schedule.start"),
        end=_instant(value.get("end"), "schedule.end"),
    )


def _instant(value: object, field: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(
                field, f"{value!r} is not an ISO 8601 instant such as 2026-07-01T02:00:00+00:00"
            ) from None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise ValidationError(field, "must be an instant with a UTC offset")
    return value


# -- tasks -------------------------------------------------------------------------------------


def _tasks(value: object) -> tuple[Task, ...]:
    if value is None or (isinstance(value, Sequence) and not isinstance(value, str) and not value):
        raise ValidationError("tasks", "a workflow needs at least one task")
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValidationError("tasks", "must be a list of tasks")
    raw = [_task(item, f"tasks[{i}]") for i, item in enumerate(value)]
    try:
        return validate_tasks(raw)
    except ValidationError as e:
        raise _named(e, raw) from None


def _task(value: object, field: str) -> Task:
    if not isinstance(value, Mapping):
        raise ValidationError(field, "must be an object with name and kind")
    if "name" not in value:
        raise ValidationError(f"{field}.name", "is required: every task of a workflow has a name")
    upstream = value.get("upstream", [])
    if isinstance(upstream, str) or not isinstance(upstream, Sequence):
        raise ValidationError(f"{field}.upstream", "must be a list of task names")
    retry = value.get("retry")
    return Task(
        name=value["name"],
        # validate_task checks the kind and the trigger rule, naming what it accepts.
        kind=cast(TaskKind, value.get("kind")),
        config={k: v for k, v in value.items() if k not in _TASK_FIELDS},
        upstream=tuple(upstream),
        timeout=value.get("timeout"),
        retry=None if retry is None else _retry(retry, f"{field}.retry"),
        trigger_rule=cast(TriggerRule, value.get("trigger_rule", TriggerRule.ALL_SUCCESS)),
        # validate_task checks these, naming the field.
        priority=value.get("priority"),
        pool=value.get("pool"),
        pool_slots=value.get("pool_slots", 1),
        callbacks=value.get("callbacks", {}),
    )


def _named(error: ValidationError, tasks: Sequence[Task]) -> ValidationError:
    """Speak the workflow's language: settings sit inline (``tasks[0].argv``), and an error
    about one task says which task it is."""
    path = error.field.replace(".config.", ".").removesuffix(".config")
    if not path.startswith("tasks["):
        return ValidationError(path, error.reason)
    name = tasks[int(path[len("tasks[") : path.index("]")])].name
    if f"task {name!r}" in error.reason:
        return ValidationError(path, error.reason)
    return ValidationError(path, f"{error.reason} (task {name!r})")


# -- values ------------------------------------------------------------------------------------


def _retry(value: object, field: str) -> RetryPolicy:
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"must be an object of {', '.join(_RETRY_KEYS)}")
    _no_unknown_keys(value, frozenset(_RETRY_KEYS), f"{field}.", field)
    initial = value.get("initial_delay", _RETRY.initial_delay)
    # A long initial delay alone should not trip the max_delay >= initial_delay rule (as the API).
    default_max = max(_RETRY.max_delay, initial) if isinstance(initial, int | float) else 0
    return RetryPolicy(
        max_attempts=value.get("max_attempts", _RETRY.max_attempts),
        initial_delay=initial,
        multiplier=value.get("multiplier", _RETRY.multiplier),
        max_delay=value.get("max_delay", default_max),
        jitter=value.get("jitter", _RETRY.jitter),
    )


def _no_unknown_keys(
    value: Mapping[Any, Any], known: frozenset[str], prefix: str, what: str
) -> None:
    for key in value:
        if key not in known:
            raise ValidationError(
                f"{prefix}{key}", f"is not a field of a {what}; use {', '.join(sorted(known))}"
            )


def _bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, "must be true or false")
    return value


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, "must be a whole number")
    return value


def _number_or_none(value: object, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValidationError(field, "must be a number of seconds above 0")
    return value


def _str(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    return value


def _str_list(value: object, field: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError(field, "must be a list of strings")
    return [_str(item, f"{field}[{i}]") for i, item in enumerate(value)]


def _mapping(value: object, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValidationError(field, "must be an object (string keys)")
    return dict(value)
