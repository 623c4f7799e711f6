"""Distributed mode: `tickwork scheduler`, `worker` and `db upgrade`.

Configured by ``TICKWORK_*`` environment variables or a TOML file (``--config``); see
``tickwork.app.settings``. The server stack is imported inside each command: client commands
load this module too, and should not pay for it.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from tickwork.app.settings import WORKER_GRACE, Settings
from tickwork.cli.common import reported_errors
from tickwork.cli.observe_options import LogFormatOption, MetricsPortOption, format_of
from tickwork.cli.options import settings_of
from tickwork.cli.output import print_line

db = typer.Typer(help="Database schema (distributed mode: PostgreSQL).", no_args_is_help=True)


def cluster_settings(ctx: typer.Context, **overrides: Any) -> Settings:
    """The settings, checked for the PostgreSQL database distributed mode needs."""
    settings = settings_of(ctx, **overrides)
    with reported_errors():
        settings.require_database()
    return settings


def scheduler(
    ctx: typer.Context,
    *,
    log_format: LogFormatOption = None,
    metrics_port: MetricsPortOption = None,
) -> None:
    """Run a scheduler replica: replicas elect one leader; the others stand by."""
    settings = cluster_settings(ctx, log_format=format_of(log_format), metrics_port=metrics_port)
    from tickwork.runtime.targets import import_from_cwd
    from tickwork.serve.process import run_process
    from tickwork.serve.wiring import build_scheduler

    import_from_cwd()  # python callbacks of the project the scheduler is started in

    with reported_errors():
        run_process(settings, build_scheduler)


def worker(
    ctx: typer.Context,
    *,
    queues: Annotated[
        str | None, typer.Option(help="Queues to take, comma-separated.", show_default="default")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Tasks run at once.", show_default="CPU count")
    ] = None,
    autoscale: Annotated[
        str | None,
        typer.Option(
            metavar="MIN:MAX",
            help="Grow and shrink the tasks run at once between MIN and MAX with the queues' "
            "backlog and the tasks' durations (starts at MIN; instead of --concurrency).",
            show_default="off",
        ),
    ] = None,
    grace: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds running tasks get to finish on SIGTERM.",
            show_default=f"{WORKER_GRACE:.0f}",
        ),
    ] = None,
    log_format: LogFormatOption = None,
    metrics_port: MetricsPortOption = None,
) -> None:
    """Run a worker process: takes task runs from Redis, records them in PostgreSQL."""
    if autoscale is not None and concurrency is not None:
        with reported_errors():
            from tickwork.core.errors import ValidationError

            raise ValidationError("autoscale", "give --autoscale or --concurrency, not both")
    settings = cluster_settings(
        ctx,
        queues=_queues(queues),
        concurrency=concurrency,
        autoscale=autoscale,
        grace=grace,
        log_format=format_of(log_format),
        metrics_port=metrics_port,
    )
    from tickwork.runtime.targets import import_from_cwd
    from tickwork.serve.process import run_process
    from tickwork.serve.wiring import build_worker

    import_from_cwd()  # python tasks of the project the worker is started in

    with reported_errors():
        run_process(settings, build_worker)


def _queues(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(q.strip() for q in value.split(",") if q.strip())
    if not names:
        with reported_errors():
            from tickwork.core.errors import ValidationError

            raise ValidationError("queues", "name at least one queue")
    return names


@db.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Migrate the database to this version's schema (safe to run again).

    On a new database it also writes the first admin token to --data-dir's admin.token.
    """
    settings = cluster_settings(ctx)
    from tickwork.serve.cluster_admin import upgrade_database

    with reported_errors():
        path = asyncio.run(upgrade_database(settings))
    print_line("database is at the newest schema")
    if path is not None:
        print_line(f"admin token: {path} (keep it private; the CLI reads it from there)")
