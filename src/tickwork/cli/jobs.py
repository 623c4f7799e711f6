"""``tickwork job ...``: add, apply, list, show, trigger, enqueue, pause, resume and delete
jobs."""

from __future__ import annotations

import sys
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
    reported_errors,
)
from tickwork.cli.complete import complete_job
from tickwork.cli.job_apply import apply
from tickwork.cli.job_edit import definition_yaml, edit
from tickwork.cli.job_enqueue import enqueue
from tickwork.cli.job_input import JobFlags, job_input
from tickwork.cli.output import (
    emit,
    is_data,
    print_data,
    print_fields,
    print_line,
    print_table,
    when,
)
from tickwork.cli.render import Col, Markup, ago, strip
from tickwork.cli.status import warn_if_unserved
from tickwork.core.alerts import DEFAULT_START_DEADLINE
from tickwork.sdk import JobInfo, RetryInfo, RunInfo, ScheduleInfo, TaskInfo
from tickwork.sdk.types import Fire

app = typer.Typer(help="Create and manage jobs.", no_args_is_help=True)
app.command("why")(why.job_why)  # cli/why.py
app.command("ledger")(why.job_ledger)  # cli/why.py
app.command("apply")(apply)
app.command("enqueue")(enqueue)
app.command("edit")(edit)

NameArg = Annotated[str, typer.Argument(help="The job's name.", autocompletion=complete_job)]
_SCHEDULE = "Schedule (exactly one)"
_TASK = "Task (exactly one kind)"
_POLICY = "Policies"
#: Newest runs read for the last-runs strip of `job list` (one request for every job).
RECENT_RUNS = 1000


@app.command("add")
def add(
    ctx: typer.Context,
    *,
    name: NameArg,
    command: Annotated[
        list[str] | None, typer.Argument(help="Shell task: the command after `--` (argv form).")
    ] = None,
    now: Annotated[
        bool, typer.Option("--now", help="Run once, now.", rich_help_panel=_SCHEDULE)
    ] = False,
    at: Annotated[
        str | None,
        typer.Option(
            help="Run once at an ISO instant with offset.",
            show_default="none",
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    allow_past: Annotated[
        bool,
        typer.Option("--allow-past", help="Accept an --at in the past.", rich_help_panel=_SCHEDULE),
    ] = False,
    cron: Annotated[
        str | None,
        typer.Option(
            help="Cron expression (5 fields).", show_default="none", rich_help_panel=_SCHEDULE
        ),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(help="IANA zone for --cron.", show_default="UTC", rich_help_panel=_SCHEDULE),
    ] = None,
    catchup: Annotated[
        bool | None,
        typer.Option(
            "--catchup/--no-catchup",
            help="Run every missed cron fire.",
            show_default="no catch-up",
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    jitter: Annotated[
        float | None,
        typer.Option(
            help="Spread each cron fire's start over this many seconds (same offset per fire).",
            show_default="the fleet's cron_spread",
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            help="No cron fire before this ISO instant.",
            show_default="none",
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            help="No cron fire after this ISO instant.",
            show_default="none",
            rich_help_panel=_SCHEDULE,
        ),
    ] = None,
    shell: Annotated[
        bool,
        typer.Option("--shell", help="Run the command through /bin/sh.", rich_help_panel=_TASK),
    ] = False,
    env: Annotated[
        list[str] | None,
        typer.Option(
            help="K=V for the command (repeat).", show_default="none", rich_help_panel=_TASK
        ),
    ] = None,
    cwd: Annotated[
        str | None,
        typer.Option(
            help="Working directory of the command.",
            show_default="the worker's",
            rich_help_panel=_TASK,
        ),
    ] = None,
    http: Annotated[
        tuple[str, str] | None,
        typer.Option(
            metavar="METHOD URL", help="Call a URL.", show_default="none", rich_help_panel=_TASK
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(help="'Name: value' (repeat).", show_default="none", rich_help_panel=_TASK),
    ] = None,
    body: Annotated[
        str | None, typer.Option(help="Request body.", show_default="none", rich_help_panel=_TASK)
    ] = None,
    python: Annotated[
        str | None,
        typer.Option(
            metavar="MODULE:FUNC",
            help="Call a function.",
            show_default="none",
            rich_help_panel=_TASK,
        ),
    ] = None,
    args: Annotated[
        str | None,
        typer.Option(
            metavar="JSON",
            help="Keyword arguments as a JSON object.",
            show_default="{}",
            rich_help_panel=_TASK,
        ),
    ] = None,
    retries: Annotated[
        int | None,
        typer.Option(help="Retries after a failure.", show_default="0", rich_help_panel=_POLICY),
    ] = None,
    backoff: Annotated[
        float | None,
        typer.Option(
            help="Seconds before the first retry.", show_default="1", rich_help_panel=_POLICY
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds an attempt may run.", show_default="no limit", rich_help_panel=_POLICY
        ),
    ] = None,
    start_deadline: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="A tick's run must start this soon after its time, else on_missed.",
            show_default="300",
            rich_help_panel=_POLICY,
        ),
    ] = None,
    sla: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="A tick's run must finish this soon after its time, else on_sla_miss.",
            show_default="none",
            rich_help_panel=_POLICY,
        ),
    ] = None,
    queue: Annotated[
        str | None,
        typer.Option(help="Worker queue.", show_default="default", rich_help_panel=_POLICY),
    ] = None,
    priority: Annotated[
        int | None,
        typer.Option(help="Higher runs first.", show_default="0", rich_help_panel=_POLICY),
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(help="A tag (repeat).", show_default="none", rich_help_panel=_POLICY),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME:TYPE[=DEFAULT]",
            help="A param trigger/enqueue may pass (repeat); others are refused.",
            show_default="none",
            rich_help_panel=_POLICY,
        ),
    ] = None,
    run_scope: Annotated[
        str | None,
        typer.Option(
            metavar="SCOPE",
            help="Who may trigger/enqueue: write or admin.",
            show_default="admin if it runs code, else write",
            rich_help_panel=_POLICY,
        ),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Add a job: one schedule, one task, optional policies.

    Examples: `job add backup --cron "30 2 * * *" --tz Europe/Berlin -- pg_dump mydb`;
    `job add ping --at 2026-12-01T10:00:00Z --http GET https://example.org/health`;
    `job add hello --now --python mypkg.tasks:hello --args '{"name": "x"}'`;
    `job add work --cron "0 * * * *" --python mypkg.tasks:work --param n:integer=1
    --run-scope write` (a write token may then enqueue it with `{"n": 5}`).
    """
    flags = JobFlags(
        command=command or [], now=now, at=at, cron=cron, tz=tz, catchup=catchup,
        jitter=jitter, start=start, end=end, shell=shell, env=env or [], cwd=cwd, http=http,
        header=header or [], body=body, python=python, args=args, retries=retries,
        backoff=backoff, timeout=timeout, queue=queue, priority=priority, tags=tag or [],
        params=param or [], run_scope=run_scope, start_deadline=start_deadline, sla=sla,
    )  # fmt: skip
    with reported_errors():
        spec = job_input(name, flags)
    with connect(ctx, url) as client:
        job = client.create_job(spec, allow_past=allow_past)
        warn_if_unserved(client, job)
    emit(output, job, f"added job {job['name']} ({describe_schedule(job['schedule'])})")


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="At most this many jobs.")] = 100,
    tag: Annotated[
        str | None, typer.Option(help="Only jobs with this tag.", show_default="all")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """List jobs by name, with their next fire and their last runs (newest on the right)."""
    with connect(ctx, url) as client:
        page = client.list_jobs(limit=limit, tag=tag)
        recent = client.list_runs(limit=RECENT_RUNS)["runs"] if not is_data(output) else []
    if is_data(output):
        print_data(output, page)
        return
    wide = output is Output.WIDE
    strips = last_runs(recent)
    time = when if wide else ago
    columns = (
        Col("name"), Col("schedule", drop=2), Col("task", drop=3), Col("paused", drop=4),
        Col("next fire", drop=1), Col("last runs"),
    )  # fmt: skip
    rows = [
        (j["name"], describe_schedule(j["schedule"]), _summarize_tasks(j["tasks"]),
         j["paused"], time(next_fire(j)), strips.get(j["name"], Markup("-")))
        for j in page["jobs"]
    ]  # fmt: skip
    print_table(columns, rows, empty="no jobs", wide=wide)


def next_fire(job: JobInfo) -> str | None:
    """A cron job's next fire, or a pending `at` job's instant (None: no fire to come)."""
    if job["next_fire_at"] is not None:
        return job["next_fire_at"]
    at = job["schedule"]["at"]
    if job["schedule"]["kind"] == "at" and at and job["last_fire_at"] is None:
        return at
    return None


def last_runs(runs: list[RunInfo], count: int = 5) -> dict[str, Markup]:
    """Each job's newest ``count`` runs as state symbols, oldest first: ``✓✓✗✓▶``."""
    by_job: dict[str, list[str]] = {}
    for run in runs:  # newest first
        states = by_job.setdefault(run["job_name"], [])
        if len(states) < count:
            states.append(run["state"])
    return {name: strip(reversed(states)) for name, states in by_job.items()}


@app.command("show")
def show(
    ctx: typer.Context,
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Show one job (-o yaml: its definition, which `job apply` takes back unchanged)."""
    with connect(ctx, url) as client:
        job = client.get_job(name)
        fires = client.upcoming(name, 3)["fires"] if not is_data(output) else []
    if output is Output.YAML:  # the definition: `job apply` of it changes nothing
        sys.stdout.write(definition_yaml(job))
        return
    if is_data(output):
        print_data(output, job)
        return
    print_fields(
        {
            "name": job["name"],
            "id": job["id"],
            "schedule": describe_schedule(job["schedule"]),
            "task": _summarize_tasks(job["tasks"]),
            "retry": _describe_retry(job["retry"]),
            "timeout": f"{job['timeout']}s" if job["timeout"] is not None else None,
            "queue": job["queue"],
            "priority": job["priority"],
            "catchup": job["catchup"],
            "jitter": f"{job['jitter']:g}s" if job.get("jitter") is not None else None,
            "max active runs": job["max_active_runs"],
            "depends on past": job["depends_on_past"],
            "start deadline": _describe_deadline(job["start_deadline"]),
            "sla": f"{job['sla']:g}s" if job["sla"] is not None else None,
            "callbacks": sorted(job["callbacks"]),
            "paused": job["paused"],
            "upcoming": [_fire_text(f) for f in fires],
            "last fire": when(job["last_fire_at"]),
            "tags": job["tags"],
            "created": when(job["created_at"]),
        }
    )
    if len(job["tasks"]) > 1:
        for task in job["tasks"]:
            print_line(f"  {_describe_node(task)}")


def _describe_deadline(seconds: float | None) -> str:
    return f"{DEFAULT_START_DEADLINE:g}s (default)" if seconds is None else f"{seconds:g}s"


@app.command("trigger")
def trigger(
    ctx: typer.Context,
    name: NameArg,
    logical_date: Annotated[
        str | None, typer.Option(help="ISO instant the run is for.", show_default="now")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Run a job now, by hand."""
    with connect(ctx, url) as client:
        run = client.trigger(name, logical_date)
    emit(output, run, f"triggered run {run['id']} of {run['job_name']} ({run['state']})")


@app.command("pause")
def pause(
    ctx: typer.Context, name: NameArg, url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:  # fmt: skip
    """Stop a job from creating new runs."""
    with connect(ctx, url) as client:
        job = client.pause(name)
    emit(output, job, f"paused job {job['name']}")


@app.command("resume")
def resume(
    ctx: typer.Context, name: NameArg, url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:  # fmt: skip
    """Resume a paused job (missed fires follow its catch-up rule)."""
    with connect(ctx, url) as client:
        job = client.resume(name)
    emit(output, job, f"resumed job {job['name']}")


@app.command("delete")
def delete(ctx: typer.Context, name: NameArg, url: UrlOption = DEFAULT_URL) -> None:
    """Delete a job and cancel its unfinished runs (its history stays)."""
    with connect(ctx, url) as client:
        client.delete_job(name)
    emit(Output.TABLE, None, f"deleted job {name}")


def describe_schedule(s: ScheduleInfo) -> str:
    """``now``, ``at 2026-12-01 10:00:00Z`` or ``cron 30 2 * * * (Europe/Berlin)``."""
    if s["kind"] == "at":
        return f"at {when(s['at'])}"
    if s["kind"] == "cron":
        return f"cron {s['cron']} ({s['timezone']})"
    return s["kind"]


def _describe_retry(retry: RetryInfo) -> str:
    attempts = retry["max_attempts"]
    if attempts == 1:
        return "no retries (1 attempt)"
    return f"{attempts} attempts, first retry after {retry['initial_delay']}s"


def _summarize_tasks(tasks: list[TaskInfo]) -> str:
    if len(tasks) == 1:
        return _describe_task(tasks[0])
    return f"workflow of {len(tasks)} tasks"


def _describe_node(task: TaskInfo) -> str:
    """``join [python: m:join] <- a, b (none_failed) pool db``: one task of a workflow."""
    text = f"{task['name']} [{_describe_task(task)}]"
    if task["upstream"]:
        text += f" <- {', '.join(task['upstream'])}"
        if task["trigger_rule"] != "all_success":
            text += f" ({task['trigger_rule']})"
    if task["pool"]:
        text += f" pool {task['pool']}"
    return text


def _describe_task(task: TaskInfo) -> str:
    c = task["config"]
    if task["kind"] == "shell":
        return f"shell: {c.get('command') or ' '.join(c.get('argv') or [])}"
    if task["kind"] == "http":
        return f"http: {c.get('method', 'GET')} {c.get('url')}"
    return f"python: {c.get('target')}"


def _fire_text(fire: Fire) -> str:
    """A fire's local time, and when its run is due if a jitter moves it."""
    text = when(fire["local"])
    return text if fire["due"] == fire["utc"] else f"{text} (due {when(fire['due'])})"
