"""``tickwork backfill ...``: create (``--dry-run``), list, show, watch, pause, resume, cancel."""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta
from datetime import time as clock_time
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from tickwork.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    OutputOption,
    UrlOption,
    connect,
    fail,
)
from tickwork.cli.output import console, emit, is_data, print_data, print_fields, print_table, when
from tickwork.sdk import Client
from tickwork.sdk.backfills import BackfillInfo, Mode, ReprocessRule

app = typer.Typer(help="Run a job over a past range of logical dates.", no_args_is_help=True)

IdArg = Annotated[str, typer.Argument(help="The backfill's id.")]
WATCH_INTERVAL = 1.0  # seconds between polls of `watch`
DRY_RUN_SHOWN = 200  # dates a dry run prints as a table (-o json: all it got)


@app.command("create")
def create(  # noqa: PLR0917 (one parameter per option, as Typer wants them)
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job to backfill.")],
    start: Annotated[
        str,
        typer.Option(
            "--from", help="First logical date: an ISO instant, or a day (in the job's zone)."
        ),
    ],
    end: Annotated[
        str,
        typer.Option("--to", help="Last logical date (inclusive); a day means its whole day."),
    ],
    mode: Annotated[str, typer.Option(help="sequential, parallel or chunked.")] = "parallel",
    max_active: Annotated[int, typer.Option(help="Runs at once (parallel).")] = 8,
    chunk_size: Annotated[int, typer.Option(help="Dates per chunk (chunked).")] = 10,
    reprocess: Annotated[
        str,
        typer.Option(help="none: only dates without a run; failed: also failed ones; all."),
    ] = "none",
    reverse: Annotated[bool, typer.Option("--reverse", help="Newest date first.")] = False,
    priority: Annotated[int, typer.Option(help="Priority of its tasks (live: 0).")] = -10,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the dates and their runs; write nothing.")
    ] = False,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Create a backfill (the server makes its runs as it goes, below live work)."""
    with connect(ctx, url) as client:
        zone = _zone_of(client, job)
        first, last = _instant(start, zone, end_of_day=False), _instant(end, zone, end_of_day=True)
        if dry_run:
            plan = client.plan_backfill(
                job, first, last, reprocess=_rule(reprocess), reverse=reverse
            )
            _print_plan(plan, output)
            return
        made = client.create_backfill(
            job,
            first,
            last,
            mode=_mode(mode),
            max_active=max_active,
            chunk_size=chunk_size,
            reprocess=_rule(reprocess),
            reverse=reverse,
            priority=priority,
        )
    total = made["progress"]["total"]
    emit(output, made, f"created backfill {made['id']} of {job}: {total} dates")


@app.command("list")
def list_backfills(
    ctx: typer.Context,
    job: Annotated[
        str | None, typer.Option(help="Only this job's backfills.", show_default="all")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """List backfills, newest first."""
    with connect(ctx, url) as client:
        found = client.list_backfills(job=job, limit=limit)
    if is_data(output):
        print_data(output, found)
        return
    rows = [
        (b["id"], b["job_name"], b["state"], b["mode"], _counts(b), when(b["created_at"]))
        for b in found["backfills"]
    ]
    print_table(("id", "job", "state", "mode", "done/total", "created"), rows, empty="no backfills")


@app.command("show")
def show(
    ctx: typer.Context,
    backfill_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Show a backfill: done, running, failed, remaining, and an ETA."""
    with connect(ctx, url) as client:
        b = client.get_backfill(backfill_id)
    if is_data(output):
        print_data(output, b)
        return
    p = b["progress"]
    info: dict[str, Any] = b  # type: ignore[assignment]  # "from"/"to" are not identifiers
    print_fields(
        {
            "id": b["id"],
            "job": b["job_name"],
            "range": f"{when(info['from'])} .. {when(info['to'])}",
            "state": b["state"] + (f" ({b['reason']})" if b["reason"] else ""),
            "mode": _mode_line(b),
            "done": f"{p['done']} of {p['total']} ({p['succeeded']} succeeded, "
            f"{p['failed']} failed, {p['skipped']} skipped)",
            "running": p["running"],
            "remaining": p["remaining"],
            "eta": _eta(p["eta_seconds"]),
        }
    )


@app.command("watch")
def watch(ctx: typer.Context, backfill_id: IdArg, url: UrlOption = DEFAULT_URL) -> None:
    """A live progress bar with counts and ETA, until the backfill ends (or Ctrl-C)."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
    )
    with connect(ctx, url) as client, Progress(*columns, console=console()) as bar:
        b = client.get_backfill(backfill_id)
        task = bar.add_task(b["job_name"], total=b["progress"]["total"], detail="")
        try:
            while True:
                p = b["progress"]
                detail = (
                    f"{p['running']} running, {p['failed']} failed, eta {_eta(p['eta_seconds'])}"
                )
                bar.update(task, completed=p["done"], detail=f"{detail}, {b['state']}")
                if b["state"] in ("completed", "cancelled"):
                    break
                time.sleep(WATCH_INTERVAL)
                b = client.get_backfill(backfill_id)
        except KeyboardInterrupt:
            return


@app.command("pause")
def pause(ctx: typer.Context, backfill_id: IdArg, url: UrlOption = DEFAULT_URL) -> None:
    """Start no more runs; the ones started go on."""
    with connect(ctx, url) as client:
        b = client.pause_backfill(backfill_id)
    emit("table", b, f"paused backfill {b['id']} ({_counts(b)} done)")


@app.command("resume")
def resume(ctx: typer.Context, backfill_id: IdArg, url: UrlOption = DEFAULT_URL) -> None:
    """Go on from where it paused."""
    with connect(ctx, url) as client:
        b = client.resume_backfill(backfill_id)
    emit("table", b, f"resumed backfill {b['id']} ({_counts(b)} done)")


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    backfill_id: IdArg,
    kill: Annotated[bool, typer.Option("--kill", help="Stop its running runs too.")] = False,
    url: UrlOption = DEFAULT_URL,
) -> None:
    """Cancel: its runs not started are cancelled; running ones finish unless --kill."""
    with connect(ctx, url) as client:
        b = client.cancel_backfill(backfill_id, kill=kill)
    emit("table", b, f"cancelled backfill {b['id']} ({_counts(b)} done)")


# -- helpers ---------------------------------------------------------------------------------


def _zone_of(client: Client, job: str) -> ZoneInfo:
    schedule = client.get_job(job)["schedule"]
    return ZoneInfo(schedule.get("timezone") or "UTC")


def _instant(text: str, zone: ZoneInfo, *, end_of_day: bool) -> str:
    """An ISO instant as given, or a day: its start (or, for ``--to``, its last instant) in
    the job's zone."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return text  # an instant: the server checks it and names the field if it is bad
    start = datetime.combine(day, clock_time(), tzinfo=zone)
    if end_of_day:
        start = datetime.combine(day + timedelta(days=1), clock_time(), tzinfo=zone)
        start -= timedelta(microseconds=1)
    return start.isoformat()


def _mode(text: str) -> Mode:
    if text not in ("sequential", "parallel", "chunked"):
        fail(f"mode: {text!r} is not one of sequential, parallel, chunked")
    return text  # type: ignore[return-value]


def _rule(text: str) -> ReprocessRule:
    if text not in ("none", "failed", "all"):
        fail(f"reprocess: {text!r} is not one of none, failed, all")
    return text  # type: ignore[return-value]


def _print_plan(plan: Any, output: str) -> None:
    if is_data(output):
        print_data(output, plan)
        return
    dates = plan["dates"]
    rows = [
        (when(d["logical_date"]), d["action"], d["run_id"] or "-", d["run_state"] or "-")
        for d in dates[:DRY_RUN_SHOWN]
    ]
    print_table(("logical date", "would", "existing run", "its state"), rows, empty="no dates")
    runs = sum(d["action"] != "skip" for d in dates)
    more = f" (the first {DRY_RUN_SHOWN} shown)" if len(dates) > DRY_RUN_SHOWN else ""
    console().print(
        f"{plan['total']} dates{more}; {runs} of the {len(dates)} listed would run. "
        "Nothing was written (dry run).",
        markup=False,
    )


def _counts(b: BackfillInfo) -> str:
    return f"{b['progress']['done']}/{b['progress']['total']}"


def _mode_line(b: BackfillInfo) -> str:
    extra = {"parallel": f"max {b['max_active']}", "chunked": f"chunks of {b['chunk_size']}"}
    parts = [b["mode"], extra.get(b["mode"], ""), f"reprocess {b['reprocess']}"]
    parts += ["reverse"] if b["reverse"] else []
    return ", ".join(p for p in parts if p)


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "unknown yet"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
