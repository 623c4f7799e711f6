"""Job definitions from where people keep them: a YAML or JSON file, or a Python module.

    spec = load_definition("etl.yaml")            # or "etl.json", or "pipelines.etl:etl"
    tw.apply_job(job_body(spec))                   # what `tickwork job apply` does

``load_definition`` reads and parses; every failure is a ``DefinitionError`` whose message
names the source and the field (``etl.yaml: tasks[1].upstream: 'ghost' is not ...``). A module
source ``module.path:attr`` is imported with the current directory on ``sys.path`` (workers
import the same module to run its python tasks) and ``attr`` may be a ``@workflow`` function,
a ``WorkflowSpec`` or a dict in the file format. ``job_body`` turns a parsed definition into
the API's job body.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import yaml

from tickwork.core.errors import TickworkError, ValidationError
from tickwork.core.model import Callbacks, RetryPolicy, Schedule, Task
from tickwork.core.workflow_spec import WorkflowSpec, parse_workflow
from tickwork.sdk.types import JobInput
from tickwork.sdk.workflow import Workflow

_MODULE_SOURCE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", re.ASCII)
_RETRY_FIELDS = ("max_attempts", "initial_delay", "multiplier", "max_delay", "jitter")


class DefinitionError(TickworkError):
    """A definition that cannot be read, or that tickwork refuses; the message names the
    source, and the field when there is one (``field``)."""

    def __init__(self, source: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{source}: {field}: {message}" if field else f"{source}: {message}")
        self.source = source
        self.field = field


def load_definition(source: str) -> WorkflowSpec:
    """The parsed definition in a file (``.yaml``, ``.yml``, ``.json``; other names are read
    as YAML, which includes JSON) or a module attribute (``module.path:attr``)."""
    if os.path.exists(source) or not _MODULE_SOURCE.fullmatch(source):
        data = _read_file(source)
    else:
        data = _module_attr(source)
    if isinstance(data, WorkflowSpec):
        return data
    try:
        return parse_workflow(data.spec() if isinstance(data, Workflow) else data)
    except ValidationError as e:
        raise DefinitionError(source, e.reason, e.field) from None
    except (TypeError, ValueError) as e:  # a @workflow body that calls tasks wrongly
        raise DefinitionError(source, str(e)) from None


def _read_file(source: str) -> object:
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DefinitionError(source, "no such file (nor a module.path:attr)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DefinitionError(source, f"cannot read it ({e})") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise DefinitionError(
                source, f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise DefinitionError(source, f"invalid YAML: {_yaml_problem(e)}") from None


def _yaml_problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is None:
        return " ".join(str(problem).split())
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"


def _module_attr(source: str) -> object:
    module_name, _, attr = source.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # the module itself may raise anything while it is imported
        message = f"cannot import {module_name}: {type(e).__name__}: {e}"
        raise DefinitionError(source, message) from None
    try:
        value: object = getattr(module, attr)
    except AttributeError:
        raise DefinitionError(source, f"module {module_name} has no attribute {attr!r}") from None
    if not isinstance(value, Workflow | WorkflowSpec | Mapping):
        raise DefinitionError(
            source, f"{attr} is a {type(value).__name__}; name a @workflow function or a dict"
        )
    return value


# -- the API's job body ------------------------------------------------------------------------


def job_body(spec: WorkflowSpec) -> JobInput:
    """The API's job body (``JobCreate``; ``Client.apply_job``) of a parsed definition."""
    body: dict[str, Any] = {
        "name": spec.name,
        "schedule": _schedule_body(spec.schedule),
        "tasks": [_task_body(task) for task in spec.tasks],
        "catchup": spec.catchup,
        "retry": _retry_body(spec.retry),
        "queue": spec.queue,
        "priority": spec.priority,
        "tags": list(spec.tags),
        "metadata": dict(spec.metadata),
        "max_active_runs": spec.max_active_runs,
        "depends_on_past": spec.depends_on_past,
        "callbacks": _callbacks_body(spec.callbacks),
        "start_deadline": spec.start_deadline,
        "sla": spec.sla,
    }
    if spec.timeout is not None:
        body["timeout"] = spec.timeout
    if spec.jitter is not None:
        body["jitter"] = spec.jitter
    if spec.params.declared:
        body["params"] = {
            "properties": {k: dict(v) for k, v in spec.params.properties.items()},
            "required": list(spec.params.required),
            "scope": spec.params.scope,
        }
    return cast(JobInput, body)


def _schedule_body(schedule: Schedule) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": schedule.kind.value, "timezone": schedule.timezone}
    if schedule.cron is not None:
        body["cron"] = schedule.cron
    for name in ("at", "start", "end"):
        instant = getattr(schedule, name)
        if instant is not None:
            body[name] = instant.isoformat()
    return body


def _task_body(task: Task) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": task.kind.value,
        "name": task.name,
        **task.config,
        "upstream": list(task.upstream),
        "trigger_rule": task.trigger_rule.value,
        "pool_slots": task.pool_slots,
        "callbacks": _callbacks_body(task.callbacks),
    }
    optional = {
        "timeout": task.timeout,
        "retry": None if task.retry is None else _retry_body(task.retry),
        "priority": task.priority,
        "pool": task.pool,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    return body


def _retry_body(retry: RetryPolicy) -> dict[str, Any]:
    return {name: getattr(retry, name) for name in _RETRY_FIELDS}


def _callbacks_body(callbacks: Callbacks) -> dict[str, Any]:
    return {
        event.value: {"kind": hook.kind.value, **hook.config} for event, hook in callbacks.items()
    }
