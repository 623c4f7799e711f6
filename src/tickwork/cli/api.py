"""``tickwork api``: the HTTP API alone, without scheduler or workers."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from tickwork.app.settings import Settings
from tickwork.cli.cluster import cluster_settings
from tickwork.cli.common import fail, reported_errors, settings_of
from tickwork.cli.observe_options import LogFormatOption, format_of

_DEFAULTS = Settings()


class ApiRole(StrEnum):
    WRITE = "write"
    READ = "read"
    ALL = "all"


def api(
    ctx: typer.Context,
    *,
    role: Annotated[
        ApiRole,
        typer.Option(
            help="Routers to serve. Over PostgreSQL (distributed mode) any role; over "
            "`tickwork up`'s SQLite only `read` (its broker lives inside `tickwork up`)."
        ),
    ] = ApiRole.ALL,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Database to serve (may be a read replica); also TICKWORK_DATABASE_URL.",
            show_default="the SQLite file in --data-dir",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Address the HTTP API listens on.", show_default=_DEFAULTS.host),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port of the HTTP API.", show_default=str(_DEFAULTS.port))
    ] = None,
    log_format: LogFormatOption = None,
) -> None:
    """Serve the HTTP API alone: in distributed mode (PostgreSQL + Redis) any role; beside
    `tickwork up`, `--role read` for search, runs and logs over its database."""
    settings = settings_of(
        ctx, database_url=database_url, host=host, port=port, log_format=format_of(log_format)
    )
    if settings.database_url.startswith("postgresql"):
        _serve_distributed(ctx, role, settings)
        return
    # Imported here, not at the top: every client command loads the CLI, and the server
    # stack (FastAPI, SQLAlchemy, uvicorn) would add about a second to each of them.
    from tickwork.serve.api import refusal
    from tickwork.serve.process import run_process
    from tickwork.serve.wiring import build_read_api

    why = refusal(role.value)
    if why is not None:
        fail(why)
    with reported_errors():
        run_process(settings, build_read_api)


def _serve_distributed(ctx: typer.Context, role: ApiRole, settings: Settings) -> None:
    settings = cluster_settings(
        ctx,
        database_url=settings.database_url,
        host=settings.host,
        port=settings.port,
        log_format=settings.log_format,
    )
    from tickwork.serve.process import run_process
    from tickwork.serve.wiring import build_api

    with reported_errors():
        run_process(settings, lambda process: build_api(process, role.value), kind="api")
