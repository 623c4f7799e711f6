"""``tickwork run why RUN_ID`` and ``tickwork job why JOB``: plain sentences from the server,
computed from the gates the scheduler and workers apply; ``tickwork job ledger JOB``."""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.common import DEFAULT_OUTPUT, DEFAULT_URL, OutputOption, UrlOption, connect
from tickwork.cli.output import is_data, print_data, print_line, print_table, when
from tickwork.sdk.insight import Why


def run_why(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Why a run is not running yet (or how it ended)."""
    with connect(ctx, url) as client:
        _print(client.why_run(run_id), output)


def job_why(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job's name.")],
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Why a job is not running now, and what holds its oldest unfinished run."""
    with connect(ctx, url) as client:
        _print(client.why_job(name), output)


def _print(why: Why, output: str) -> None:
    if is_data(output):
        print_data(output, why)
        return
    for reason in why["reasons"]:
        print_line(reason["message"])


def job_ledger(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The job's name.")],
    *,
    start: Annotated[str, typer.Option("--from", help="First instant (ISO, with offset).")],
    end: Annotated[str, typer.Option("--to", help="Last instant (ISO, with offset).")],
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Every tick the job's schedule promised in a range, and what became of it."""
    with connect(ctx, url) as client:
        found = client.ledger(name, start, end)
    if is_data(output):
        print_data(output, found)
        return
    rows = [
        (when(t["logical_date"]), t["status"], t["run_id"] or "-", t["run_state"] or "-",
         t["dst"] or "")
        for t in found["ticks"]
    ]  # fmt: skip
    print_table(("tick", "status", "run", "run state", "dst"), rows, empty="no ticks")
    counts = ", ".join(f"{n} {status}" for status, n in sorted(found["counts"].items()))
    print_line(counts or "no ticks in this range")
