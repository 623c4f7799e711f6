"""Job and task spec validation. Pure: every error is a ``ValidationError(field, reason)``."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from tickwork.core.alerts import alert_policy
from tickwork.core.dag import cycle_error, find_cycle
from tickwork.core.errors import ValidationError
from tickwork.core.jitter import check_jitter
from tickwork.core.model import (
    RUN_EVENTS,
    Callback,
    CallbackEvent,
    Job,
    Pool,
    ScheduleKind,
    Task,
    TaskKind,
    TriggerRule,
)
from tickwork.core.params import validate_contract
from tickwork.core.refs import RESULT_REF
from tickwork.core.retry import validate_retry
from tickwork.core.schedule import validate_schedule
from tickwork.core.task_config import (
    check_headers,
    check_timeout,
    check_url_auth,
    is_http_url,
    is_int,
    json_object,
    python_config,
    task_config,
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", re.ASCII)
#: A job, task or pool name, for JSON Schema (``^…$``: JSON Schema patterns are unanchored).
NAME_PATTERN = rf"^{_NAME.pattern}$"
_QUEUE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.ASCII)
_MAX_TAGS, _MAX_TAG = 32, 64
_TRIGGER_RULES = frozenset(rule.value for rule in TriggerRule)
_EVENTS = frozenset(event.value for event in CallbackEvent)
_CALLBACK_KEYS = {TaskKind.HTTP: ("url", "url_auth", "headers"), TaskKind.PYTHON: ("target",)}
MAX_SLOTS = 1_000_000
_MAX_DESCRIPTION = 1000


def validate_job_name(name: str, field: str = "name") -> str:
    """A job (or task) name: a letter or digit, then up to 127 of ``A-Za-z0-9_.-``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValidationError(
            field,
            f"{name!r} is not a valid name; use 1-128 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit",
        )
    return name


def validate_job(job: Job, now: datetime, *, allow_past: bool = False) -> Job:
    """Check every field of a job and return it normalized (UTC datetimes, cron text,
    HTTP method in capitals)."""
    validate_job_name(job.name)
    schedule = validate_schedule(job.schedule, now, allow_past=allow_past)
    tasks = validate_tasks(job.tasks)
    check_timeout(job.timeout, "timeout")
    if not isinstance(job.queue, str) or not _QUEUE.fullmatch(job.queue):
        raise ValidationError(
            "queue", f"{job.queue!r} is not a queue name; use 1-64 of a-z, 0-9, '_' or '-'"
        )
    _priority(job.priority, "priority")
    validate_max_active_runs(job.max_active_runs)
    jitter = check_jitter(job.jitter)
    if jitter is not None and schedule.kind is not ScheduleKind.CRON:
        raise ValidationError("jitter", "only cron schedules take a jitter (it spreads fires)")
    if not isinstance(job.depends_on_past, bool):
        raise ValidationError("depends_on_past", "must be true or false")
    alert_policy(job.start_deadline, job.sla)
    return replace(
        job,
        schedule=schedule,
        tasks=tasks,
        jitter=jitter,
        retry=validate_retry(job.retry, "retry"),
        tags=_tags(job.tags),
        metadata=json_object(job.metadata, "metadata"),
        callbacks=validate_callbacks(job.callbacks, "callbacks"),
        params=validate_contract(job.params, _stored_kwargs(tasks)),
        start_deadline=_float_or_none(job.start_deadline),
        sla=_float_or_none(job.sla),
    )


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def _stored_kwargs(tasks: Sequence[Task]) -> list[tuple[str, Mapping[str, Any]]]:
    return [
        (f"tasks[{i}]", t.config.get("kwargs", {}))
        for i, t in enumerate(tasks)
        if t.kind is TaskKind.PYTHON
    ]


def validate_max_active_runs(value: object, field: str = "max_active_runs") -> int | None:
    """How many runs of a job may be unfinished at once: a whole number from 1, or ``None``
    (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLOTS:
        raise ValidationError(
            field,
            f"must be a whole number of 1 or more, or null for no limit (at most {MAX_SLOTS:,})",
        )
    return value


def validate_pool(pool: Pool) -> Pool:
    """A pool's name (as a job name), its slots (1 to a million) and a short description."""
    validate_job_name(pool.name)
    if not is_int(pool.slots) or not 1 <= pool.slots <= MAX_SLOTS:
        raise ValidationError("slots", f"must be a whole number from 1 to {MAX_SLOTS}")
    if not isinstance(pool.description, str) or len(pool.description) > _MAX_DESCRIPTION:
        raise ValidationError(
            "description", f"must be a string of at most {_MAX_DESCRIPTION} characters"
        )
    return pool


def validate_tasks(tasks: Sequence[Task]) -> tuple[Task, ...]:
    """Check each task and the graph they form: unique names, known upstreams, no cycle, and
    ``{"$result": task}`` references only to upstreams. In a job of several tasks an error
    about one task also names it: ``(task 'join')``."""
    if isinstance(tasks, str | bytes) or not isinstance(tasks, Sequence) or not tasks:
        raise ValidationError("tasks", "a job needs at least one task")
    checked: list[Task] = []
    for i, task in enumerate(tasks):
        with _about(task, len(tasks)):
            checked.append(validate_task(task, f"tasks[{i}]"))
    names = {task.name for task in checked}
    seen: set[str] = set()
    for i, task in enumerate(checked):
        with _about(task, len(tasks)):
            if task.name in seen:
                raise ValidationError(
                    f"tasks[{i}].name", f"{task.name!r} is used twice; give each task its own name"
                )
            seen.add(task.name)
            _check_edges(task, f"tasks[{i}]", names)
    cycle = find_cycle(checked)
    if cycle:
        raise cycle_error(cycle)
    return tuple(checked)


def _check_edges(task: Task, field: str, names: Collection[str]) -> None:
    for up in task.upstream:
        if up not in names or up == task.name:
            raise ValidationError(
                f"{field}.upstream",
                f"{up!r} is not another task of this job; name one of {sorted(names)}",
            )
    for path, ref in _result_refs(task.config, f"{field}.config"):
        if ref not in task.upstream:
            raise ValidationError(
                path,
                f"uses the result of {ref!r}, which is not an upstream of task {task.name!r}; "
                "add it to upstream",
            )


@contextmanager
def _about(task: Task, total: int) -> Iterator[None]:
    """Add the task's name to an error about it, when the job has several tasks and the
    reason does not name it already."""
    try:
        yield
    except ValidationError as e:
        name = getattr(task, "name", None)
        if total < 2 or not isinstance(name, str) or f"task {name!r}" in e.reason:
            raise
        raise ValidationError(e.field, f"{e.reason} (task {name!r})") from None


def _result_refs(value: object, field: str) -> list[tuple[str, str]]:
    """Every ``{"$result": name}`` in a task's config, with where it sits."""
    if isinstance(value, Mapping):
        if set(value) == {RESULT_REF}:
            return [(field, str(value[RESULT_REF]))]
        return [ref for k, v in value.items() for ref in _result_refs(v, f"{field}.{k}")]
    if isinstance(value, list | tuple):
        return [ref for i, v in enumerate(value) for ref in _result_refs(v, f"{field}[{i}]")]
    return []


# -- tasks -----------------------------------------------------------------------------------


def validate_task(task: Task, field: str = "tasks[0]") -> Task:
    """Check one task's name, kind, config (by kind), timeout and retry; return it normalized."""
    validate_job_name(task.name, f"{field}.name")
    try:
        kind = TaskKind(task.kind)
    except ValueError:
        raise ValidationError(
            f"{field}.kind", f"{task.kind!r} is not a task kind; use shell, http or python"
        ) from None
    config = task_config(task.config, kind, f"{field}.config")
    upstream = task.upstream
    if isinstance(upstream, str) or not all(isinstance(u, str) for u in upstream):
        raise ValidationError(f"{field}.upstream", "must be a list of task names")
    check_timeout(task.timeout, f"{field}.timeout")
    retry = None if task.retry is None else validate_retry(task.retry, f"{field}.retry")
    rule = _trigger_rule(task.trigger_rule, f"{field}.trigger_rule")
    if task.priority is not None:
        _priority(task.priority, f"{field}.priority")
    if task.pool is not None:
        validate_job_name(task.pool, f"{field}.pool")
    if not is_int(task.pool_slots) or not 1 <= task.pool_slots <= MAX_SLOTS:
        raise ValidationError(f"{field}.pool_slots", "must be a whole number of 1 or more")
    return replace(
        task,
        kind=kind,
        config=config,
        upstream=tuple(upstream),
        retry=retry,
        trigger_rule=rule,
        callbacks=validate_callbacks(task.callbacks, f"{field}.callbacks", run_events=False),
    )


def _priority(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not -100 <= value <= 100:
        raise ValidationError(field, "must be a whole number from -100 to 100")


# -- callbacks -------------------------------------------------------------------------------


def validate_callbacks(
    callbacks: object, field: str = "callbacks", *, run_events: bool = True
) -> dict[CallbackEvent, Callback]:
    """Hooks by event: ``on_failure``, ``on_success``, ``on_retry`` (and, for a job, not a
    task: ``on_missed``, ``on_sla_miss``), each an http webhook (``url``, optional
    ``headers``) or a python callable (``target``). A hook is a ``Callback`` or the plain
    object a definition file gives (``{kind: http, url: ...}``)."""
    if not isinstance(callbacks, Mapping):
        raise ValidationError(field, f"must be an object with {_events()}")
    checked: dict[CallbackEvent, Callback] = {}
    for event, hook in callbacks.items():
        if not isinstance(event, str) or event not in _EVENTS:
            raise ValidationError(
                f"{field}.{event}", f"is not a callback event; use {_events(run_events)}"
            )
        if not run_events and event in RUN_EVENTS:
            raise ValidationError(
                f"{field}.{event}", "is an event of a whole run: set it on the job"
            )
        checked[CallbackEvent(event)] = _callback(hook, f"{field}.{event}")
    return checked


def _events(run_events: bool = True) -> str:
    return ", ".join(e for e in CallbackEvent if run_events or e not in RUN_EVENTS)


def _callback(hook: object, field: str) -> Callback:
    kind, config = _callback_parts(hook, field)
    allowed = _CALLBACK_KEYS[kind]
    for key in config:
        if key not in allowed:
            raise ValidationError(
                f"{field}.{key}", f"is not a {kind} callback setting; use {', '.join(allowed)}"
            )
    if kind is TaskKind.PYTHON:
        return Callback(kind=kind, config=python_config(config, field))
    url = config.get("url")
    if not isinstance(url, str) or not is_http_url(url):
        raise ValidationError(
            f"{field}.url",
            "must be an http:// or https:// URL with a host, such as https://example.org/hook",
        )
    check_url_auth(config, url, field)
    if "headers" in config:
        check_headers(config["headers"], f"{field}.headers")
        config["headers"] = dict(config["headers"])
    return Callback(kind=kind, config=config)


def _callback_parts(hook: object, field: str) -> tuple[TaskKind, dict[str, Any]]:
    if isinstance(hook, Callback):
        kind: object = hook.kind
        config = dict(hook.config)
    elif isinstance(hook, Mapping):
        kind = hook.get("kind")
        config = {k: v for k, v in hook.items() if k != "kind"}
    else:
        raise ValidationError(field, "must be an object such as {kind: http, url: ...}")
    if not isinstance(kind, str) or kind not in _CALLBACK_KEYS:
        raise ValidationError(
            f"{field}.kind", f"{kind!r} is not a callback kind; use http (url) or python (target)"
        )
    return TaskKind(kind), config


def _trigger_rule(rule: object, field: str) -> TriggerRule:
    if isinstance(rule, str) and rule in _TRIGGER_RULES:
        return TriggerRule(rule)
    raise ValidationError(field, f"{rule!r} is not a trigger rule; use {', '.join(TriggerRule)}")


def _tags(tags: object) -> tuple[str, ...]:
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise ValidationError("tags", "must be a list of strings")
    if len(tags) > _MAX_TAGS:
        raise ValidationError("tags", f"at most {_MAX_TAGS} tags are allowed")
    for i, tag in enumerate(tags):
        if not isinstance(tag, str) or not 0 < len(tag) <= _MAX_TAG:
            raise ValidationError(f"tags[{i}]", f"must be a string of 1-{_MAX_TAG} characters")
    return tuple(tags)
