"""``tickwork run ...``: list, show, logs (``--follow``), cancel and retry runs (or one task
of a run, ``--task NAME``). Runs are named by their id or its last 8 characters."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

import typer

from tickwork.cli import why
from tickwork.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    Output,
    OutputOption,
    UrlOption,
    connect,
)
from tickwork.cli.complete import complete_job, complete_run
from tickwork.cli.output import emit, is_data, print_data
from tickwork.cli.run_view import dag_order, print_run, print_runs
from tickwork.core.errors import TickworkError, ValidationError
from tickwork.sdk import Client, LogChunk, RunDetail, RunInfo, TaskRunInfo

app = typer.Typer(help="Inspect and control runs.", no_args_is_help=True)
app.command("why")(why.run_why)  # cli/why.py

RunArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN", help="The run's id, or its last 8 characters.", autocompletion=complete_run
    ),
]
TaskOption = Annotated[
    str | None,
    typer.Option("--task", help="Only this task of the run (its name).", show_default="all"),
]
POLL_INTERVAL = 0.5  # seconds between log polls with --follow
#: Runs searched for a short id: the newest this many.
SHORT_ID_SEARCH = 1000
_NOT_RUN = frozenset({"scheduled", "queued", "waiting", "upstream_failed", "skipped"})


@app.command("list")
def list_runs(
    ctx: typer.Context,
    *,
    job: Annotated[
        str | None,
        typer.Option(
            help="Only this job's runs (a deleted job's too).",
            show_default="all",
            autocompletion=complete_job,
        ),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(help="A run state, or `dead` for dead-lettered runs.", show_default="all"),
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option("--from", help="Logical dates from this ISO instant.", show_default="all"),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", help="Logical dates before this ISO instant.", show_default="all"),
    ] = None,
    trigger: Annotated[
        str | None,
        typer.Option(
            help="schedule, manual, catchup, missed, backfill or enqueue.", show_default="all"
        ),
    ] = None,
    tag: Annotated[
        str | None, typer.Option(help="Only runs of jobs with this tag.", show_default="all")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Runs per page.")] = 50,
    page: Annotated[int, typer.Option(min=1, help="Which page of --limit runs.")] = 1,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """List runs, newest logical date first."""
    with connect(ctx, url) as client:
        tagged = _jobs_tagged(client, tag) if tag else None
        query = RunQuery(job, state, from_, to, trigger, tagged)
        runs = _page(query.runs(client), (page - 1) * limit, limit + 1)
    more = len(runs) > limit
    runs = runs[:limit]
    if is_data(output):
        print_data(output, {"runs": runs, "page": page, "more": more})
        return
    print_runs(runs, wide=output is Output.WIDE)
    if more:
        sys.stderr.write(f"more: --page {page + 1}\n")


@app.command("show")
def show(
    ctx: typer.Context,
    run_id: RunArg,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Show a run: its tasks in DAG order, their attempts, and the params it ran with."""
    with connect(ctx, url) as client:
        run = client.get_run(resolve_run(client, run_id))
    if is_data(output):
        print_data(output, run)
    else:
        print_run(run, wide=output is Output.WIDE)


@app.command("logs")
def logs(
    ctx: typer.Context,
    run_id: RunArg,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the run finishes.")
    ] = False,
    task: TaskOption = None,
    url: UrlOption = DEFAULT_URL,
) -> None:
    """Print a run's captured output (stdout to stdout; stderr and notes to stderr).

    On a workflow without --task: each task's output in DAG order, under a header naming it.
    """
    with connect(ctx, url) as client:
        run = client.get_run(resolve_run(client, run_id))
        if task is not None or len(run["task_runs"]) == 1:
            task_run = _task_run(run, task) if task else run["task_runs"][0]
            _print_task_logs(client, run, task_run, follow)
        elif follow:
            names = ", ".join(t["task_name"] for t in dag_order(run["task_runs"]))
            raise ValidationError("task", f"--follow follows one task: --task one of {names}")
        else:
            _print_workflow_logs(client, run)


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
        run_id = resolve_run(client, run_id)
        if task is None:
            run = client.cancel_run(run_id)
        else:
            run = client.cancel_task_run(_task_run(client.get_run(run_id), task)["id"])
    emit(output, run, f"cancel requested for {_what(run, task)}")


@app.command("retry")
def retry(
    ctx: typer.Context,
    run_id: RunArg,
    task: TaskOption = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Re-run a run's dead-lettered (failed), upstream-failed or cancelled tasks, or one of them
    with --task."""
    with connect(ctx, url) as client:
        run_id = resolve_run(client, run_id)
        if task is None:
            run = client.retry_run(run_id)
        else:
            run = client.retry_task_run(_task_run(client.get_run(run_id), task)["id"])
    emit(output, run, f"retrying {_what(run, task)}")


def resolve_run(client: Client, text: str) -> str:
    """A run's full id from its id or the end of it (as tables show it)."""
    if len(text) >= 32:
        return text
    found: list[str] = []
    cursor = None
    searched = 0
    while searched < SHORT_ID_SEARCH:
        page = client.list_runs(limit=1000, cursor=cursor)
        found += [r["id"] for r in page["runs"] if r["id"].endswith(text)]
        searched += len(page["runs"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    if len(found) == 1:
        return found[0]
    if found:
        raise ValidationError("run", f"{text!r} ends {len(found)} run ids; give more of the id")
    raise TickworkError(
        f"no run {text!r} (no id among the newest {SHORT_ID_SEARCH} runs ends with it)"
    )


def _jobs_tagged(client: Client, tag: str) -> frozenset[str]:
    names: list[str] = []
    after = None
    while True:
        page = client.list_jobs(limit=1000, after=after, tag=tag)
        names += [j["name"] for j in page["jobs"]]
        after = page.get("next_after")
        if not after:
            return frozenset(names)


@dataclass(frozen=True, slots=True)
class RunQuery:
    """What ``run list`` asks for. The server filters job, state and dates; trigger and tag
    are filtered here, over its pages, so --limit and --page count matching runs."""

    job: str | None = None
    state: str | None = None
    logical_from: str | None = None
    logical_to: str | None = None
    trigger: str | None = None
    jobs: frozenset[str] | None = None  # the jobs of a --tag

    def runs(self, client: Client) -> Iterator[RunInfo]:
        """Every matching run, newest first, fetched a page at a time as they are consumed."""
        cursor = None
        while True:
            page = client.list_runs(
                job=self.job, state=self.state, limit=200, cursor=cursor,
                logical_from=self.logical_from, logical_to=self.logical_to,
            )  # fmt: skip
            yield from (r for r in page["runs"] if self._matches(r))
            cursor = page["next_cursor"]
            if cursor is None:
                return

    def _matches(self, run: RunInfo) -> bool:
        if self.trigger is not None and run["trigger"] != self.trigger:
            return False
        return self.jobs is None or run["job_name"] in self.jobs


def _page(runs: Iterator[RunInfo], skip: int, take: int) -> list[RunInfo]:
    taken: list[RunInfo] = []
    for i, run in enumerate(runs):
        if i >= skip:
            taken.append(run)
        if len(taken) == take:
            break
    return taken


def _task_run(run: RunDetail, task: str) -> TaskRunInfo:
    for task_run in run["task_runs"]:
        if task_run["task_name"] == task:
            return task_run
    names = ", ".join(tr["task_name"] for tr in run["task_runs"])
    raise ValidationError("task", f"name one of the run's tasks: {names}")


def _what(run: RunDetail, task: str | None) -> str:
    """``run ID (state)``, or ``task NAME of run ID (state, attempt N)``."""
    if task is None:
        return f"run {run['id']} ({run['state']})"
    task_run = next(tr for tr in run["task_runs"] if tr["task_name"] == task)
    return f"task {task} of run {run['id']} ({task_run['state']}, attempt {task_run['attempt']})"


def _print_workflow_logs(client: Client, run: RunDetail) -> None:
    for task_run in dag_order(run["task_runs"]):
        sys.stderr.write(f"== {task_run['task_name']} ({task_run['state']}) ==\n")
        _print_task_logs(client, run, task_run, follow=False)
    sys.stderr.write("(one task only: --task NAME)\n")


def _print_task_logs(client: Client, run: RunDetail, task_run: TaskRunInfo, follow: bool) -> None:
    after = -1
    printed = False
    while True:
        page = client.logs(run["id"], task=task_run["task_name"], after_seq=after)
        for chunk in page["chunks"]:
            _write_chunk(chunk)
        printed = printed or bool(page["chunks"])
        after = page["next_after_seq"]
        if page["chunks"]:
            continue  # there may be more right away
        if not follow or page["finished"]:
            break
        time.sleep(POLL_INTERVAL)
    if not printed and task_run["state"] in _NOT_RUN:
        sys.stderr.write(
            f"task {task_run['task_name']} has not run ({task_run['state']}): no output yet\n"
        )


def _write_chunk(chunk: LogChunk) -> None:
    stream = sys.stdout if chunk["stream"] == "stdout" else sys.stderr
    stream.write(chunk["data"])
    stream.flush()
