"""Runs for people: the run list, and one run with its tasks in DAG order, their attempts
and the params it ran with."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tickwork.cli.output import print_fields, print_table, when
from tickwork.cli.render import Col, ago, short_id, state
from tickwork.sdk import RunDetail, RunInfo, TaskRunInfo

PARAMS_ENV = "TICKWORK_PARAMS"  # how a shell task receives a run's params


def print_runs(runs: Sequence[RunInfo], wide: bool) -> None:
    columns = (
        Col("id"), Col("job"), Col("state"), Col("trigger", drop=2),
        Col("logical date", drop=1), Col("started", drop=3), Col("finished", drop=4),
    )  # fmt: skip
    time = when if wide else ago
    rows = [
        (short_id(r["id"], wide), r["job_name"], state(r["state"]), r["trigger"],
         time(r["logical_date"]), time(r["started_at"]), time(r["finished_at"]))
        for r in runs
    ]  # fmt: skip
    print_table(columns, rows, empty="no runs", wide=wide)


def print_run(run: RunDetail, wide: bool) -> None:
    tasks = dag_order(run["task_runs"])
    fields: dict[str, object] = {
        "id": run["id"],
        "job": run["job_name"],
        "state": run["state"],
        "trigger": run["trigger"],
        "logical date": when(run["logical_date"]),
        "created": when(run["created_at"]),
        "started": when(run["started_at"]),
        "finished": when(run["finished_at"]),
    }
    params = run_params(tasks)
    if params is not None:
        fields["params"] = json.dumps(params, ensure_ascii=False)
    for task in tasks:
        if task["kind"] == "python" and task["config"].get("kwargs"):
            label = "args" if len(tasks) == 1 else f"args of {task['task_name']}"
            fields[label] = json.dumps(task["config"]["kwargs"], ensure_ascii=False)
    print_fields(fields)
    _print_tasks(tasks, wide)
    _print_attempts(run, tasks, wide)


def _print_tasks(tasks: Sequence[TaskRunInfo], wide: bool) -> None:
    columns = (
        Col("task"), Col("kind", drop=3), Col("state"), Col("attempt"),
        Col("upstream", drop=4, wide=len(tasks) == 1), Col("started", drop=2),
        Col("finished", drop=2), Col("exit", drop=1), Col("error", drop=5),
    )  # fmt: skip
    time = when if wide else ago
    rows = [
        (t["task_name"], t["kind"], state(t["state"]), attempt(t), t["upstream"],
         time(t["started_at"]), time(t["finished_at"]), t["exit_code"], t["error"])
        for t in tasks
    ]  # fmt: skip
    print_table(columns, rows, title="tasks", wide=wide)


def _print_attempts(run: RunDetail, tasks: Sequence[TaskRunInfo], wide: bool) -> None:
    if not run["attempts"]:
        return
    order = {t["id"]: i for i, t in enumerate(tasks)}
    names = {t["id"]: t["task_name"] for t in tasks}
    attempts = sorted(run["attempts"], key=lambda a: (order.get(a["task_run_id"], 0), a["attempt"]))
    columns = (
        Col("task"), Col("attempt"), Col("state"), Col("started", drop=2),
        Col("finished", drop=2), Col("exit", drop=1), Col("error", drop=3),
    )  # fmt: skip
    time = when if wide else ago
    rows = [
        (names.get(a["task_run_id"], "?"), a["attempt"], state(a["state"]),
         time(a["started_at"]), time(a["finished_at"]), a["exit_code"], a["error"])
        for a in attempts
    ]  # fmt: skip
    print_table(columns, rows, title="attempts", wide=wide)


def attempt(task_run: TaskRunInfo) -> str:
    """``1/3``: the attempt of the allowed ones; past them (a retry by hand, or attempts a
    shutdown interrupted, which do not count) just the number."""
    allowed = task_run["retry"]["max_attempts"]
    n = task_run["attempt"]
    return f"{n}/{allowed}" if n <= allowed else str(n)


def dag_order(tasks: Sequence[TaskRunInfo]) -> list[TaskRunInfo]:
    """Tasks with every task after its upstreams; otherwise in the job's order."""
    placed: list[TaskRunInfo] = []
    done: set[str] = set()
    pending = list(tasks)
    while pending:
        ready = [t for t in pending if set(t["upstream"]) <= done] or pending[:1]
        for task in ready:
            placed.append(task)
            done.add(task["task_name"])
            pending.remove(task)
    return placed


def run_params(tasks: Sequence[TaskRunInfo]) -> dict[str, Any] | None:
    """The params the run was given, as its shell tasks received them (None: none given, or
    no shell task to tell; python tasks show them among their keyword arguments, ``args``)."""
    for task in tasks:
        env = task["config"].get("env") or {}
        if task["kind"] == "shell" and PARAMS_ENV in env:
            try:
                found = json.loads(env[PARAMS_ENV])
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None
