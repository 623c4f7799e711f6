"""Distributed mode: `tickwork scheduler`, `worker`, `status` and `db upgrade`.

Configured by ``TICKWORK_*`` environment variables or a TOML file (``--config``); see
``tickwork.app.cluster``. The server stack is imported inside each command: client commands
load this module too, and should not pay for it.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from tickwork.app.cluster import ClusterSettings, load_settings
from tickwork.cli.common import Output, reported_errors
from tickwork.cli.output import print_fields, print_json, print_line, print_table, when

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar="TICKWORK_CONFIG",
        help="TOML file of settings (keys as in TICKWORK_* without the prefix, lower case).",
        show_default=False,
    ),
]

db = typer.Typer(help="Database schema (distributed mode: PostgreSQL).", no_args_is_help=True)


def settings_of(config: Path | None, **overrides: Any) -> ClusterSettings:
    with reported_errors():
        settings = load_settings(config, **overrides)
        settings.require_database()
    return settings


def scheduler(config: ConfigOption = None) -> None:
    """Run a scheduler replica: replicas elect one leader; the others stand by."""
    settings = settings_of(config)
    from tickwork.runtime.targets import import_from_cwd
    from tickwork.serve.cluster import run_process, serve_scheduler

    import_from_cwd()  # python callbacks of the project the scheduler is started in

    with reported_errors():
        run_process(lambda stop: serve_scheduler(settings, stop))


def worker(
    config: ConfigOption = None,
    queues: Annotated[
        str | None, typer.Option(help="Queues to take, comma-separated [default: default].")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Tasks run at once [default: CPU count].")
    ] = None,
) -> None:
    """Run a worker process: takes task runs from Redis, records them in PostgreSQL."""
    settings = settings_of(config, queues=_queues(queues), concurrency=concurrency)
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
def db_upgrade(
    config: ConfigOption = None,
    token_dir: Annotated[
        Path,
        typer.Option(
            envvar="TICKWORK_DATA_DIR",
            help="Where the first admin token (admin.token) is written on a new database.",
        ),
    ] = Path(".tickwork"),
) -> None:
    """Migrate the database to this version's schema (safe to run again)."""
    settings = settings_of(config)
    from tickwork.serve.cluster_admin import upgrade_database

    with reported_errors():
        path = asyncio.run(upgrade_database(settings, token_dir))
    print_line("database is at the newest schema")
    if path is not None:
        print_line(f"admin token: {path} (keep it private; the CLI reads it from there)")


def status(
    config: ConfigOption = None,
    output: Annotated[Output, typer.Option("--output", "-o")] = Output.TABLE,
) -> None:
    """The scheduler leader, its epoch and lease, workers, and queue depths."""
    settings = settings_of(config)
    from tickwork.serve.cluster_admin import cluster_status

    with reported_errors():
        found = asyncio.run(cluster_status(settings))
    if output == Output.JSON:
        print_json(_status_json(found))
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
