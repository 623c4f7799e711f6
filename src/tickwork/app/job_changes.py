"""Changing a job (``PATCH``) and passing params to a manual run: pure functions over records.

A change applies to future runs only. Task runs copy their task's definition when a run is
created, so runs already created (scheduled, queued or running) keep what they had.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from tickwork.core.errors import ValidationError
from tickwork.core.model import Job, Task, TaskKind
from tickwork.core.validate import validate_job

#: The fields of a Job a ``PATCH`` may change. Name, identity, pause state and cron
#: bookkeeping are not among them (pause and resume have their own commands).
UPDATABLE_FIELDS = frozenset(
    {
        "schedule",
        "tasks",
        "retry",
        "timeout",
        "queue",
        "priority",
        "catchup",
        "jitter",
        "tags",
        "metadata",
        "max_active_runs",
        "depends_on_past",
        "callbacks",
        "params",
        "start_deadline",
        "sla",
    }
)
#: The environment variable a shell task reads a manual run's params from, as JSON.
PARAMS_ENV = "TICKWORK_PARAMS"


def changed_job(
    job: Job, changes: Mapping[str, Any], now: datetime, *, allow_past: bool = False
) -> tuple[Job, bool]:
    """``job`` with ``changes`` applied and validated by the core, and whether its schedule
    changed (then the caller plans its next fire from ``now``, as on create)."""
    unknown = sorted(set(changes) - UPDATABLE_FIELDS)
    if unknown:
        raise ValidationError(unknown[0], "cannot be changed; see JobUpdate for what can")
    new_schedule = "schedule" in changes and changes["schedule"] != job.schedule
    # An unchanged `at` instant may lie in the past by now; only a new one is checked.
    past_ok = allow_past or not new_schedule
    updated = validate_job(replace(job, **changes, updated_at=now), now, allow_past=past_ok)
    rescheduled = updated.schedule != job.schedule
    if rescheduled:
        updated = replace(updated, next_fire_at=None)
    return updated, rescheduled


def with_params(job: Job, params: Mapping[str, Any] | None) -> Job:
    """The job as a manual run with ``params`` sees it. ``params`` must have passed the job's
    contract (``resolve_params``): only declared names, checked values.

    Python tasks get the params as *extra* keyword arguments: a stored kwarg always wins
    (and the contract may not declare one, see ``validate_contract``), so params never
    change what a task executes. Shell tasks get them as JSON in ``TICKWORK_PARAMS`` only;
    http tasks are sent unchanged.
    """
    if not params:
        return job
    return replace(job, tasks=tuple(_task_with_params(t, params) for t in job.tasks))


def _task_with_params(task: Task, params: Mapping[str, Any]) -> Task:
    return replace(task, config=config_for_run(task.kind, task.config, params))


def config_for_run(
    kind: TaskKind, config: Mapping[str, Any], params: Mapping[str, Any]
) -> Mapping[str, Any]:
    """A task's ``config`` as a run with (contract-checked) ``params`` sees it (see
    ``with_params``); the same object for an http task, which ignores params."""
    if kind is TaskKind.PYTHON:
        return {**config, "kwargs": {**params, **config.get("kwargs", {})}}
    if kind is TaskKind.SHELL:
        return {**config, "env": {**config.get("env", {}), PARAMS_ENV: json.dumps(dict(params))}}
    return config
