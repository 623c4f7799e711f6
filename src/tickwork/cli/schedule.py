"""``tickwork schedule preview``: fire times of a cron expression, computed here (no server)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from zoneinfo import ZoneInfo

import typer

from tickwork.cli.common import DEFAULT_OUTPUT, Output, OutputOption, reported_errors
from tickwork.cli.output import is_data, print_data, print_table
from tickwork.core.errors import ValidationError
from tickwork.core.jitter import check_jitter, spread_fires
from tickwork.core.model import Schedule, ScheduleKind
from tickwork.core.schedule import upcoming, validate_schedule

app = typer.Typer(help="Work with schedules.", no_args_is_help=True)


@app.command("preview")
def preview(
    expr: Annotated[str, typer.Argument(help='Cron expression, e.g. "0 9 * * MON-FRI".')],
    *,
    tz: Annotated[str, typer.Option(help="IANA zone the expression is read in.")] = "UTC",
    count: Annotated[int, typer.Option(min=1, max=1000, help="How many fire times.")] = 10,
    from_: Annotated[
        str | None, typer.Option("--from", help="ISO instant to start after.", show_default="now")
    ] = None,
    jitter: Annotated[
        float,
        typer.Option(
            help="Seconds each fire's start is spread over (a job's jitter, or cron_spread).",
            show_default="0: on the dot",
        ),
    ] = 0.0,
    job: Annotated[
        str, typer.Option(help="The job name the spread is drawn from (with --jitter).")
    ] = "",
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Print the next fire times (local and UTC), and with --jitter when each run is due.
    Creates nothing."""
    with reported_errors():
        after = _parse_instant(from_, "from") if from_ else datetime.now(UTC)
        schedule = Schedule(kind=ScheduleKind.CRON, cron=expr, timezone=tz)
        fires = upcoming(validate_schedule(schedule, after), after, count + 1)
        spread = check_jitter(jitter) or 0.0
    following = fires[count] if len(fires) > count else None
    dues = spread_fires(job, fires[:count], spread, following)
    _show(fires[:count], dues, tz, output, spread=bool(spread))


def _show(
    fires: list[datetime], dues: list[datetime], tz: str, output: Output, *, spread: bool
) -> None:
    zone = ZoneInfo(tz)
    if is_data(output):
        items = [
            {"utc": _iso(f), "local": f.astimezone(zone).isoformat(), "due": _iso(d)}
            for f, d in zip(fires, dues, strict=True)
        ]
        print_data(output, {"timezone": tz, "fires": items})
        return
    rows = [
        (i, f.astimezone(zone).strftime("%a %Y-%m-%d %H:%M %Z"), _iso(f), *([_iso(d)] * spread))
        for i, (f, d) in enumerate(zip(fires, dues, strict=True), 1)
    ]
    print_table(("#", f"local ({tz})", "UTC", *(["due (UTC)"] * spread)), rows)


def _parse_instant(text: str, field: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(field, f"{text!r} is not an ISO 8601 instant") from None
    if value.utcoffset() is None:
        raise ValidationError(field, "must include a UTC offset, e.g. 2026-12-01T10:00:00Z")
    return value.astimezone(UTC)


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
