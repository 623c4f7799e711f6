"""Job and task spec validation. Pure: every error is a ``ValidationError(field, reason)``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from tickwork.core.dag import cycle_error, find_cycle
from tickwork.core.errors import ValidationError
from tickwork.core.model import Job, Task, TaskKind, TriggerRule
from tickwork.core.retry import validate_retry
from tickwork.core.schedule import validate_schedule

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", re.ASCII)
_QUEUE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.ASCII)
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_TARGET = re.compile(rf"{_IDENT}(\.{_IDENT})*:{_IDENT}", re.ASCII)
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_KEYS = {
    TaskKind.SHELL: ("argv", "command", "shell", "env", "cwd"),
    TaskKind.HTTP: ("method", "url", "headers", "body"),
    TaskKind.PYTHON: ("target", "kwargs"),
}
_MAX_TIMEOUT = 7 * 24 * 3600.0
_MAX_TAGS, _MAX_TAG = 32, 64
_MAX_DEPTH = 64  # nesting of JSON values; deeper is refused rather than recursed into
_TRIGGER_RULES = frozenset(rule.value for rule in TriggerRule)


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
    _timeout(job.timeout, "timeout")
    if not isinstance(job.queue, str) or not _QUEUE.fullmatch(job.queue):
        raise ValidationError(
            "queue", f"{job.queue!r} is not a queue name; use 1-64 of a-z, 0-9, '_' or '-'"
        )
    if not _is_int(job.priority) or not -100 <= job.priority <= 100:
        raise ValidationError("priority", "must be a whole number from -100 to 100")
    return replace(
        job,
        schedule=schedule,
        tasks=tasks,
        retry=validate_retry(job.retry, "retry"),
        tags=_tags(job.tags),
        metadata=_json_object(job.metadata, "metadata"),
    )


def validate_tasks(tasks: Sequence[Task], *, allow_dag: bool = False) -> tuple[Task, ...]:
    """Check each task and the graph they form (unique names, known upstreams, no cycle).

    Without ``allow_dag`` a job holds exactly one task: the engine does not execute DAGs yet.
    Workflow definitions (``tickwork.core.workflow_spec``) pass ``allow_dag=True``.
    """
    if isinstance(tasks, str | bytes) or not isinstance(tasks, Sequence) or not tasks:
        raise ValidationError("tasks", "a job needs at least one task")
    checked = tuple(validate_task(task, f"tasks[{i}]") for i, task in enumerate(tasks))
    _check_graph(checked)
    if len(checked) > 1 and not allow_dag:
        raise ValidationError(
            "tasks",
            "a job holds exactly one task for now; multi-task jobs (DAG workflows) are not "
            "yet supported",
        )
    return checked


def _check_graph(tasks: tuple[Task, ...]) -> None:
    index: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.name in index:
            raise ValidationError(
                f"tasks[{i}].name", f"{task.name!r} is used twice; give each task its own name"
            )
        index[task.name] = i
    for i, task in enumerate(tasks):
        for up in task.upstream:
            if up not in index or up == task.name:
                raise ValidationError(
                    f"tasks[{i}].upstream",
                    f"{up!r} is not another task of this job; name one of {sorted(index)}",
                )
    cycle = find_cycle(tasks)
    if cycle:
        raise cycle_error(cycle)


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
    config = _config(task.config, kind, f"{field}.config")
    upstream = task.upstream
    if isinstance(upstream, str) or not all(isinstance(u, str) for u in upstream):
        raise ValidationError(f"{field}.upstream", "must be a list of task names")
    _timeout(task.timeout, f"{field}.timeout")
    retry = None if task.retry is None else validate_retry(task.retry, f"{field}.retry")
    rule = _trigger_rule(task.trigger_rule, f"{field}.trigger_rule")
    return replace(
        task, kind=kind, config=config, upstream=tuple(upstream), retry=retry, trigger_rule=rule
    )


def _trigger_rule(rule: object, field: str) -> TriggerRule:
    if isinstance(rule, str) and rule in _TRIGGER_RULES:
        return TriggerRule(rule)
    raise ValidationError(field, f"{rule!r} is not a trigger rule; use {', '.join(TriggerRule)}")


def _config(config: object, kind: TaskKind, field: str) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        raise ValidationError(field, f"must be an object of {kind} settings")
    allowed = _KEYS[kind]
    for key in config:
        if key not in allowed:
            raise ValidationError(
                f"{field}.{key}", f"is not a {kind} setting; use {', '.join(allowed)}"
            )
    checks = {TaskKind.SHELL: _shell, TaskKind.HTTP: _http, TaskKind.PYTHON: _python}
    return checks[kind](dict(config), field)


def _shell(config: dict[str, Any], field: str) -> dict[str, Any]:
    argv, command, shell = config.get("argv"), config.get("command"), config.get("shell", False)
    if not isinstance(shell, bool):
        raise ValidationError(f"{field}.shell", "must be true or false")
    if argv is not None and command is not None:
        raise ValidationError(field, "give either argv or command (with shell: true), not both")
    if shell:
        if not isinstance(command, str) or not command.strip():
            raise ValidationError(f"{field}.command", "shell: true needs a non-empty command")
    elif command is not None:
        raise ValidationError(
            f"{field}.shell", "a command string runs only with shell: true; or give argv"
        )
    elif not _str_list(argv):
        raise ValidationError(
            f"{field}.argv", "must be a non-empty list of strings such as ['pg_dump', 'db']"
        )
    if "env" in config:
        _str_map(config["env"], f"{field}.env")
    if "cwd" in config and (not isinstance(config["cwd"], str) or not config["cwd"]):
        raise ValidationError(f"{field}.cwd", "must be a directory path")
    if argv is not None:
        config["argv"] = list(argv)
    return config


def _http(config: dict[str, Any], field: str) -> dict[str, Any]:
    method = config.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in _METHODS:
        raise ValidationError(f"{field}.method", f"{method!r} is not one of {', '.join(_METHODS)}")
    config["method"] = method.upper()
    url = config.get("url")
    if not isinstance(url, str) or not _http_url(url):
        raise ValidationError(
            f"{field}.url",
            "must be an http:// or https:// URL with a host, such as https://example.org/hook",
        )
    if "headers" in config:
        _str_map(config["headers"], f"{field}.headers")
    if "body" in config and not isinstance(config["body"], str):
        _json_value(config["body"], f"{field}.body", 0)
    return config


def _http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a malformed port or IPv6 literal
        return False


def _python(config: dict[str, Any], field: str) -> dict[str, Any]:
    target = config.get("target")
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        raise ValidationError(
            f"{field}.target", "must be an import path such as 'mypkg.tasks:hello'"
        )
    if "kwargs" in config:
        config["kwargs"] = _json_object(config["kwargs"], f"{field}.kwargs")
    return config


# -- values ----------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _timeout(value: object, field: str) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= _MAX_TIMEOUT
    ):
        raise ValidationError(field, "must be a number of seconds above 0 and at most 7 days")


def _str_list(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(v, str) for v in value)
        and bool(value[0])
    )


def _str_map(value: object, field: str) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError(field, "must map names to string values")


def _tags(tags: object) -> tuple[str, ...]:
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise ValidationError("tags", "must be a list of strings")
    if len(tags) > _MAX_TAGS:
        raise ValidationError("tags", f"at most {_MAX_TAGS} tags are allowed")
    for i, tag in enumerate(tags):
        if not isinstance(tag, str) or not 0 < len(tag) <= _MAX_TAG:
            raise ValidationError(f"tags[{i}]", f"must be a string of 1-{_MAX_TAG} characters")
    return tuple(tags)


def _json_object(value: object, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(field, "must be a JSON object (string keys)")
    _json_value(value, field, 0)
    return dict(value)


def _json_value(value: object, field: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValidationError(field, f"nests deeper than {_MAX_DEPTH} levels; flatten it")
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(field, "must hold finite numbers only (no NaN or Infinity)")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _json_value(item, f"{field}[{i}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(field, f"key {key!r} must be a string (JSON objects)")
            _json_value(item, f"{field}.{key}", depth + 1)
        return
    raise ValidationError(
        field, f"a {type(value).__name__} is not JSON; use strings, numbers, lists or objects"
    )
