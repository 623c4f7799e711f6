"""``tickwork job add`` flags → the API's job body. Refuses contradictory flags up front."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tickwork.core.errors import ValidationError
from tickwork.sdk import JobInput, ParamsInput, RetryInput, ScheduleInput, TaskInput


@dataclass(frozen=True, slots=True)
class JobFlags:
    """Every flag of ``job add``, as typed on the command line."""

    command: list[str] = field(default_factory=list)
    now: bool = False
    at: str | None = None
    cron: str | None = None
    tz: str | None = None
    catchup: bool | None = None
    jitter: float | None = None
    start: str | None = None
    end: str | None = None
    shell: bool = False
    env: list[str] = field(default_factory=list)
    cwd: str | None = None
    http: tuple[str, str] | None = None
    header: list[str] = field(default_factory=list)
    body: str | None = None
    python: str | None = None
    args: str | None = None
    retries: int | None = None
    backoff: float | None = None
    timeout: float | None = None
    queue: str | None = None
    priority: int | None = None
    tags: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    run_scope: str | None = None
    start_deadline: float | None = None
    sla: float | None = None


def job_input(name: str, flags: JobFlags) -> JobInput:
    """The body of ``POST /jobs`` for these flags; ``ValidationError`` names a bad flag."""
    job: JobInput = {"name": name, "schedule": _schedule(flags), "task": _task(flags)}
    retry = _retry(flags)
    if retry:
        job["retry"] = retry
    if flags.catchup is not None:
        job["catchup"] = flags.catchup
    if flags.jitter is not None:
        job["jitter"] = flags.jitter
    if flags.timeout is not None:
        job["timeout"] = flags.timeout
    if flags.queue is not None:
        job["queue"] = flags.queue
    if flags.priority is not None:
        job["priority"] = flags.priority
    if flags.tags:
        job["tags"] = list(flags.tags)
    if flags.start_deadline is not None:
        job["start_deadline"] = flags.start_deadline
    if flags.sla is not None:
        job["sla"] = flags.sla
    if flags.params or flags.run_scope is not None:
        job["params"] = params_input(flags.params, flags.run_scope)
    return job


def params_input(declared: list[str], scope: str | None) -> ParamsInput:
    """A params contract from ``--param NAME:TYPE[=DEFAULT]`` flags (DEFAULT is JSON, or
    plain text for a string) and ``--run-scope``."""
    properties: dict[str, dict[str, Any]] = {}
    for item in declared:
        head, has_default, default = item.partition("=")
        name, found, kind = head.partition(":")
        if not found or not name.strip() or not kind.strip():
            raise ValidationError("params", f"--param {item!r} is not NAME:TYPE[=DEFAULT]")
        schema: dict[str, Any] = {"type": kind.strip()}
        if has_default:
            schema["default"] = _default(default, schema["type"])
        properties[name.strip()] = schema
    contract: ParamsInput = {"properties": properties}
    if scope is not None:
        if scope not in ("write", "admin"):
            raise ValidationError("params.scope", "--run-scope must be write or admin")
        contract["scope"] = "write" if scope == "write" else "admin"
    return contract


def _default(text: str, kind: str) -> object:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text  # plain text: a string default (the API refuses it for other types)
    return text if kind == "string" and not isinstance(value, str) else value


def _schedule(f: JobFlags) -> ScheduleInput:
    given = [flag for flag, on in (("--now", f.now), ("--at", f.at), ("--cron", f.cron)) if on]
    if len(given) != 1:
        raise ValidationError("schedule", "give exactly one of --now, --at ISO, --cron EXPR")
    cron_only = {
        "--tz": f.tz,
        "--start": f.start,
        "--end": f.end,
        "--catchup": f.catchup,
        "--jitter": f.jitter,
    }
    _only_with(f.cron, "--cron", "schedule", cron_only)
    if f.now:
        return {"kind": "now"}
    if f.at:
        return {"kind": "at", "at": f.at}
    assert f.cron is not None
    schedule: ScheduleInput = {"kind": "cron", "cron": f.cron, "timezone": f.tz or "UTC"}
    if f.start:
        schedule["start"] = f.start
    if f.end:
        schedule["end"] = f.end
    return schedule


def _task(f: JobFlags) -> TaskInput:
    if sum(1 for on in (f.command, f.http, f.python) if on) != 1:
        raise ValidationError(
            "task", "give exactly one of: a command after --, --http METHOD URL, --python MOD:FUNC"
        )
    shell_only = {"--shell": f.shell, "--env": f.env, "--cwd": f.cwd}
    _only_with(f.command, "a command after --", "task", shell_only)
    _only_with(f.http, "--http", "task", {"--header": f.header, "--body": f.body})
    _only_with(f.python, "--python", "task", {"--args": f.args})
    if f.http:
        return _http_task(f.http, f)
    if f.python:
        return {"kind": "python", "target": f.python, "kwargs": _kwargs(f.args)}
    return _shell_task(f)


def _shell_task(f: JobFlags) -> TaskInput:
    task: TaskInput = {"kind": "shell"}
    if f.shell:
        # One command line for /bin/sh; several words are joined as a shell would see them.
        task["shell"] = True
        task["command"] = " ".join(f.command)
    else:
        task["argv"] = list(f.command)
    if f.env:
        task["env"] = _pairs(f.env, "=", "task.env", "--env K=V")
    if f.cwd:
        task["cwd"] = f.cwd
    return task


def _http_task(method_url: tuple[str, str], f: JobFlags) -> TaskInput:
    method, url = method_url
    task: TaskInput = {"kind": "http", "method": method.upper(), "url": url}
    if f.header:
        task["headers"] = _pairs(f.header, ":", "task.headers", "--header 'Name: value'")
    if f.body is not None:
        task["body"] = f.body
    return task


def _kwargs(args: str | None) -> dict[str, object]:
    if args is None:
        return {}
    try:
        kwargs = json.loads(args)
    except json.JSONDecodeError as e:
        raise ValidationError(
            "task.kwargs", f"--args is not valid JSON ({e.msg} at char {e.pos})"
        ) from None
    if not isinstance(kwargs, dict):
        raise ValidationError("task.kwargs", '--args must be a JSON object, e.g. \'{"name": "x"}\'')
    return kwargs


def _retry(f: JobFlags) -> RetryInput:
    retry: RetryInput = {}
    if f.retries is not None:
        if f.retries < 0:
            raise ValidationError("retry.max_attempts", "--retries must be 0 or more")
        retry["max_attempts"] = f.retries + 1
    if f.backoff is not None:
        retry["initial_delay"] = f.backoff
    return retry


def _pairs(items: list[str], sep: str, field_name: str, form: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise ValidationError(field_name, f"{item!r} is not of the form {form}")
        pairs[key.strip()] = value.strip() if sep == ":" else value
    return pairs


def _only_with(anchor: object, anchor_flag: str, area: str, flags: Mapping[str, object]) -> None:
    if anchor:
        return
    for flag, value in flags.items():
        if value not in (None, False, [], ()):
            raise ValidationError(area, f"{flag} applies only with {anchor_flag}")
