"""``tickwork run ...``: list, show, logs (``--follow``), cancel and retry runs (or one task
of a run, ``--task NAME``)."""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from tickwork.cli import why
from tickwork.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    OutputOption,
    UrlOption,
    connect,
)
from tickwork.cli.output import emit, is_data, print_data, print_fields, print_table, when
from tickwork.core.errors import ValidationError
from tickwork.sdk import Client, LogChunk, RunDetail, TaskRunInfo

app = typer.Typer(help="Inspect and control runs.", no_args_is_help=True)
app.command("why")(why.run_why)  # cli/why.py

RunArg = Annotated[str, typer.Argument(help="The run's id.")]
TaskOption = Annotated[
    str | None,
    typer.Option("--task", help="Only this task of the run (its name).", show_default="all"),
]
POLL_INTERVAL = 0.5  # seconds between log polls with --follow


@app.command("list")
def list_runs(
    ctx: typer.Context,
    *,
    job: Annotated[
        str | None,
        typer.Option(help="Only this job's runs (a deleted job's too).", show_default="all"),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(help="A run state, or `dead` for dead-lettered runs.", show_default="all"),
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs.")] = 50,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """List runs, newest first."""
    with connect(ctx, url) as client:
        page = client.list_runs(job=job, state=state, limit=limit)
    if is_data(output):
        print_data(output, page)
        return
    rows = [
        (r["id"], r["job_name"], when(r["logical_date"]), r["state"], r["trigger"],
         when(r["started_at"]), when(r["finished_at"]))
        for r in page["runs"]
    ]  # fmt: skip
    columns = ("id", "job", "logical date", "state", "trigger", "started", "finished")
    print_table(columns, rows, empty="no runs")


@app.command("show")
def show(
    ctx: typer.Context,
    run_id: RunArg,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Show a run with its tasks and attempts."""
    with connect(ctx, url) as client:
        run = client.get_run(run_id)
    if is_data(output):
        print_data(output, run)
    else:
        _print_run(run)


@app.command("logs")
def logs(
    ctx: typer.Context,
    run_id: RunArg,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the run finishes.")
    ] = False,
    task: Annotated[
        str | None, typer.Option(help="Task name (multi-task runs).", show_default="all")
    ] = None,
    url: UrlOption = DEFAULT_URL,
) -> None:
    """Print a run's captured output (stdout to stdout; stderr and notes to stderr)."""
    with connect(ctx, url) as client:
        _print_logs(client, run_id, task, follow)


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    run_id: RunArg,
    task: TaskOption = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Cancel a run, or one task of it; running tasks are killed within about a second."""
    with connect(ctx, url) as client:
        if task is None:
            run = client.cancel_run(run_id)
        else:
            run = client.cancel_task_run(_task_run(client, run_id, task)["id"])
    emit(output, run, f"cancel requested for {_what(run, task)}")


@app.command("retry")
def retry(
    ctx: typer.Context,
    run_id: RunArg,
    task: TaskOption = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Re-run a run's dead-lettered (failed), upstream-failed or cancelled tasks, or one of
    them."""
    with connect(ctx, url) as client:
        if task is None:
            run = client.retry_run(run_id)
        else:
            run = client.retry_task_run(_task_run(client, run_id, task)["id"])
    emit(output, run, f"retrying {_what(run, task)}")


def _task_run(client: Client, run_id: str, task: str) -> TaskRunInfo:
    task_runs = client.get_run(run_id)["task_runs"]
    for task_run in task_runs:
        if task_run["task_name"] == task:
            return task_run
    names = ", ".join(tr["task_name"] for tr in task_runs)
    raise ValidationError("task", f"name one of the run's tasks: {names}")


def _what(run: RunDetail, task: str | None) -> str:
    """``run ID (state)``, or ``task NAME of run ID (state, attempt N)``."""
    if task is None:
        return f"run {run['id']} ({run['state']})"
    task_run = next(tr for tr in run["task_runs"] if tr["task_name"] == task)
    return f"task {task} of run {run['id']} ({task_run['state']}, attempt {task_run['attempt']})"


def _print_logs(client: Client, run_id: str, task: str | None, follow: bool) -> None:
    after = -1
    while True:
        page = client.logs(run_id, task=task, after_seq=after)
        for chunk in page["chunks"]:
            _write_chunk(chunk)
        after = page["next_after_seq"]
        if page["chunks"]:
            continue  # there may be more right away
        if not follow or page["finished"]:
            return
        time.sleep(POLL_INTERVAL)


def _write_chunk(chunk: LogChunk) -> None:
    stream = sys.stdout if chunk["stream"] == "stdout" else sys.stderr
    stream.write(chunk["data"])
    stream.flush()


def _print_run(run: RunDetail) -> None:
    print_fields(
        {
            "id": run["id"],
            "job": run["job_name"],
            "logical date": when(run["logical_date"]),
            "state": run["state"],
            "trigger": run["trigger"],
            "created": when(run["created_at"]),
            "started": when(run["started_at"]),
            "finished": when(run["finished_at"]),
        }
    )
    tasks = [
        (t["task_name"], t["kind"], t["state"], f"{t['attempt']}/{t['retry']['max_attempts']}",
         when(t["started_at"]), when(t["finished_at"]), t["exit_code"], t["error"])
        for t in run["task_runs"]
    ]  # fmt: skip
    print_table(
        ("task", "kind", "state", "attempt", "started", "finished", "exit", "error"),
        tasks,
        title="tasks",
    )
    if run["attempts"]:
        attempts = [
            (a["attempt"], a["state"], when(a["started_at"]), when(a["finished_at"]), a["error"])
            for a in run["attempts"]
        ]
        print_table(("attempt", "state", "started", "finished", "error"), attempts, "attempts")
