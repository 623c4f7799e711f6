"""Mapping between domain records and table rows (plain dicts in, records out)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from sqlalchemy.engine import RowMapping

from tickwork.core.model import (
    Attempt,
    Callback,
    CallbackEvent,
    Callbacks,
    Job,
    LogChunk,
    RetryPolicy,
    Run,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    Task,
    TaskKind,
    TaskRun,
    TaskRunState,
    TriggerRule,
)
from tickwork.core.params import NO_PARAMS, ParamsContract

#: The stored columns of a run and of a task run, derived from the records once (a task
#: run's ``inputs`` is filled in at claim time, never stored). Every column list of the
#: store's statements and bulk rows is one of these.
RUN_COLUMNS = tuple(f.name for f in fields(Run))
TASK_RUN_COLUMNS = tuple(f.name for f in fields(TaskRun) if f.name != "inputs")


def params_to_json(contract: ParamsContract) -> dict[str, Any] | None:
    if not contract.declared:
        return None
    return {
        "properties": dict(contract.properties),
        "required": list(contract.required),
        "scope": contract.scope,
    }


def params_from_json(data: Mapping[str, Any] | None) -> ParamsContract:
    if not data:
        return NO_PARAMS
    return ParamsContract(data["properties"], tuple(data["required"]), data["scope"])


def callbacks_to_json(callbacks: Callbacks) -> dict[str, Any] | None:
    if not callbacks:
        return None
    return {
        str(event): {"kind": cb.kind.value, **dict(cb.config)} for event, cb in callbacks.items()
    }


def callbacks_from_json(data: Mapping[str, Any] | None) -> Callbacks:
    if not data:
        return {}
    out: dict[CallbackEvent, Callback] = {}
    for event, spec in data.items():
        config = {k: v for k, v in spec.items() if k != "kind"}
        out[CallbackEvent(event)] = Callback(kind=TaskKind(spec["kind"]), config=config)
    return out


def retry_to_json(policy: RetryPolicy) -> dict[str, Any]:
    # Spelled out: ``asdict`` walks and deep-copies generically, and this runs for every task
    # and task run written (a tenth of the API's CPU time when creating jobs in bulk).
    return {
        "max_attempts": policy.max_attempts,
        "initial_delay": policy.initial_delay,
        "multiplier": policy.multiplier,
        "max_delay": policy.max_delay,
        "jitter": policy.jitter,
    }


def retry_from_json(data: Mapping[str, Any]) -> RetryPolicy:
    return RetryPolicy(**data)


def job_to_row(job: Job) -> dict[str, Any]:
    s = job.schedule
    return {
        "id": job.id,
        "name": job.name,
        "schedule_kind": s.kind.value,
        "cron": s.cron,
        "timezone": s.timezone,
        "at": s.at,
        "start_at": s.start,
        "end_at": s.end,
        "catchup": job.catchup,
        "paused": job.paused,
        "queue": job.queue,
        "priority": job.priority,
        "retry": retry_to_json(job.retry),
        "timeout": job.timeout,
        "tags": list(job.tags),
        "metadata": dict(job.metadata),
        "max_active_runs": job.max_active_runs,
        "depends_on_past": job.depends_on_past,
        "callbacks": callbacks_to_json(job.callbacks),
        "next_fire_at": job.next_fire_at,
        "last_fire_at": job.last_fire_at,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "deleted_at": None,
        "params": params_to_json(job.params),
        "start_deadline": job.start_deadline,
        "sla": job.sla,
        "jitter": job.jitter,
    }


def job_from_row(row: RowMapping, tasks: tuple[Task, ...]) -> Job:
    schedule = Schedule(
        kind=ScheduleKind(row["schedule_kind"]),
        at=row["at"],
        cron=row["cron"],
        timezone=row["timezone"],
        start=row["start_at"],
        end=row["end_at"],
    )
    return Job(
        id=row["id"],
        name=row["name"],
        schedule=schedule,
        tasks=tasks,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        retry=retry_from_json(row["retry"]),
        timeout=row["timeout"],
        queue=row["queue"],
        priority=row["priority"],
        catchup=row["catchup"],
        jitter=row["jitter"],
        paused=row["paused"],
        tags=tuple(row["tags"]),
        metadata=row["metadata"],
        max_active_runs=row["max_active_runs"],
        depends_on_past=row["depends_on_past"],
        callbacks=callbacks_from_json(row["callbacks"]),
        params=params_from_json(row["params"]),
        start_deadline=row["start_deadline"],
        sla=row["sla"],
        next_fire_at=row["next_fire_at"],
        last_fire_at=row["last_fire_at"],
    )


def task_to_row(job_id: str, position: int, task: Task) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "name": task.name,
        "kind": task.kind.value,
        "config": dict(task.config),
        "upstream": list(task.upstream),
        "timeout": task.timeout,
        "retry": None if task.retry is None else retry_to_json(task.retry),
        "position": position,
        "trigger_rule": task.trigger_rule.value,
        "priority": task.priority,
        "pool": task.pool,
        "pool_slots": task.pool_slots,
        "callbacks": callbacks_to_json(task.callbacks),
    }


def task_from_row(row: RowMapping) -> Task:
    retry = row["retry"]
    return Task(
        name=row["name"],
        kind=TaskKind(row["kind"]),
        config=row["config"],
        upstream=tuple(row["upstream"]),
        timeout=row["timeout"],
        retry=None if retry is None else retry_from_json(retry),
        trigger_rule=TriggerRule(row["trigger_rule"]),
        priority=row["priority"],
        pool=row["pool"],
        pool_slots=row["pool_slots"],
        callbacks=callbacks_from_json(row["callbacks"]),
    )


def run_to_row(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "job_id": run.job_id,
        "job_name": run.job_name,
        "logical_date": run.logical_date,
        "state": run.state.value,
        "trigger": run.trigger.value,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def run_from_row(row: RowMapping) -> Run:
    return Run(
        id=row["id"],
        job_id=row["job_id"],
        job_name=row["job_name"],
        logical_date=row["logical_date"],
        state=RunState(row["state"]),
        trigger=RunTrigger(row["trigger"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def task_run_to_row(tr: TaskRun) -> dict[str, Any]:
    row = {name: getattr(tr, name) for name in TASK_RUN_COLUMNS}
    row.update(
        kind=tr.kind.value,
        state=tr.state.value,
        config=dict(tr.config),
        retry=retry_to_json(tr.retry),
        upstream=list(tr.upstream),
        trigger_rule=tr.trigger_rule.value,
        callbacks=callbacks_to_json(tr.callbacks),
    )
    return row


def task_run_from_row(row: Mapping[Any, Any]) -> TaskRun:
    values = {name: row[name] for name in TASK_RUN_COLUMNS}
    values.update(
        kind=TaskKind(row["kind"]),
        state=TaskRunState(row["state"]),
        retry=retry_from_json(row["retry"]),
        upstream=tuple(row["upstream"]),
        trigger_rule=TriggerRule(row["trigger_rule"]),
        callbacks=callbacks_from_json(row["callbacks"]),
    )
    return TaskRun(**values)


def attempt_from_row(row: RowMapping) -> Attempt:
    return Attempt(
        task_run_id=row["task_run_id"],
        attempt=row["attempt"],
        state=TaskRunState(row["state"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=row["error"],
        exit_code=row["exit_code"],
        worker_id=row["worker_id"],
    )


def log_to_row(chunk: LogChunk) -> dict[str, Any]:
    return asdict(chunk)


def log_from_row(row: RowMapping) -> LogChunk:
    return LogChunk(
        task_run_id=row["task_run_id"],
        attempt=row["attempt"],
        seq=row["seq"],
        stream=row["stream"],
        data=row["data"],
        created_at=row["created_at"],
    )
