"""Distributed mode: `tickwork scheduler`, `worker`, `status` and `db upgrade`.

Configured by ``TICKWORK_*`` environment variables or a TOML file (``--config``); see
``tickwork.app.settings``. The server stack is imported inside each command: client commands
load this module too, and should not pay for it.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Annotated, Any

import typer

from tickwork.app.settings import WORKER_GRACE, Settings
from tickwork.cli.common import OutputOption, reported_errors
from tickwork.cli.options import Output, settings_of
from tickwork.cli.output import print_data, print_fields, print_line, print_table, when

db = typer.Typer(help="Database schema (distributed mode: PostgreSQL).", no_args_is_help=True)


def cluster_settings(ctx: typer.Context, **overrides: Any) -> Settings:
    """The settings, checked for the PostgreSQL database distributed mode needs."""
    settings = settings_of(ctx, **overrides)
    with reported_errors():
        settings.require_database()
    return settings


def scheduler(ctx: typer.Context) -> None:
    """Run a scheduler replica: replicas elect one leader; the others stand by."""
    settings = cluster_settings(ctx)
    from tickwork.runtime.targets import import_from_cwd
    from tickwork.serve.cluster import run_process, serve_scheduler

    import_from_cwd()  # python callbacks of the project the scheduler is started in

    with reported_errors():
        run_process(lambda stop: serve_scheduler(settings, stop))


def worker(
    ctx: typer.Context,
    queues: Annotated[
        str | None, typer.Option(help="Queues to take, comma-separated.", show_default="default")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Tasks run at once.", show_default="CPU count")
    ] = None,
    grace: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds running tasks get to finish on SIGTERM.",
            show_default=f"{WORKER_GRACE:.0f}",
        ),
    ] = None,
) -> None:
    """Run a worker process: takes task runs from Redis, records them in PostgreSQL."""
    settings = cluster_settings(ctx, queues=_queues(queues), concurrency=concurrency, grace=grace)
    from tickwork.runtime.targets import import_from_cwd
    from tickwork.serve.cluster import run_process, serve_worker

    import_from_cwd()  # python tasks of the project the worker is started in

    with reported_errors():
        run_process(lambda stop: serve_worker(settings, stop))


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


def status(ctx: typer.Context, output: OutputOption = Output.TABLE) -> None:
    """The scheduler leader, its epoch and lease, workers, and queue depths."""
    settings = cluster_settings(ctx)
    from tickwork.serve.cluster_admin import cluster_status

    with reported_errors():
        found = asyncio.run(cluster_status(settings))
    if output in (Output.JSON, Output.YAML):
        print_data(output, _status_json(found))
        return
    _print_status(found)


def _status_json(found: Any) -> dict[str, Any]:
    leader = found.leader
    return {
        "leader": None
        if leader is None
        else {
            "holder": leader.holder,
            "epoch": leader.token,
            "lease_expires_at": leader.expires_at.isoformat(),
            "live": found.leader_live,
        },
        "workers": [{**asdict(w), "lost": w.id in found.lost} | _iso(w) for w in found.workers],
        "queues": found.depths,
        "broker_error": found.broker_error,
    }


def _iso(w: Any) -> dict[str, Any]:
    return {k: getattr(w, k).isoformat() for k in ("started_at", "heartbeat_at")} | {
        "queues": list(w.queues),
        "stopped_at": None,
    }


def _print_status(found: Any) -> None:
    leader = found.leader
    print_fields(
        {
            "leader": "none" if leader is None else leader.holder,
            "epoch": "-" if leader is None else leader.token,
            "lease expires": "-" if leader is None else when(leader.expires_at.isoformat()),
            "lease": "live" if found.leader_live else "EXPIRED (no leader)",
        }
    )
    print_table(
        ["worker", "queues", "running", "concurrency", "last heartbeat", "state"],
        [
            (
                w.id,
                ",".join(w.queues),
                w.running,
                w.concurrency,
                when(w.heartbeat_at.isoformat()),
                "lost" if w.id in found.lost else "ok",
            )
            for w in found.workers
        ],
        empty="no workers",
    )
    if found.depths is None:
        print_line(f"queues: Redis did not answer ({found.broker_error})")
    else:
        print_table(["queue", "waiting"], sorted(found.depths.items()), empty="no queues yet")
