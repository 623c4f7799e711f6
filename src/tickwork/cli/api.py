"""``tickwork api``: the HTTP API alone, without scheduler or workers."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from tickwork.app.settings import EmbeddedSettings
from tickwork.cli.cluster import settings_of
from tickwork.cli.common import fail, reported_errors

_DEFAULTS = EmbeddedSettings()


class ApiRole(StrEnum):
    WRITE = "write"
    READ = "read"
    ALL = "all"


def api(
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
            envvar="TICKWORK_DATABASE_URL",
            help="Database to read (may be a read replica) [default: the SQLite file of "
            "TICKWORK_DATA_DIR].",
            show_default=False,
        ),
    ] = None,
    data_dir: Annotated[
        Path, typer.Option(envvar="TICKWORK_DATA_DIR", help="Where `tickwork up` keeps data.")
    ] = _DEFAULTS.data_dir,
    host: Annotated[
        str, typer.Option(envvar="TICKWORK_HOST", help="Address the HTTP API listens on.")
    ] = _DEFAULTS.host,
    port: Annotated[
        int, typer.Option(envvar="TICKWORK_PORT", help="Port of the HTTP API.")
    ] = _DEFAULTS.port,
) -> None:
    """Serve the HTTP API alone: in distributed mode (PostgreSQL + Redis) any role; beside
    `tickwork up`, `--role read` for search, runs and logs over its database."""
    if database_url and database_url.startswith("postgresql"):
        _serve_distributed(role, database_url, host, port)
        return
    # Imported here, not at the top: every client command loads the CLI, and the server
    # stack (FastAPI, SQLAlchemy, uvicorn) would add about a second to each of them.
    from tickwork.serve.api import refusal, run_read_api

    why = refusal(role.value)
    if why is not None:
        fail(why)
    settings = EmbeddedSettings(data_dir=data_dir, database_url=database_url)
    with reported_errors():
        run_read_api(settings.effective_database_url, host, port)


def _serve_distributed(role: ApiRole, database_url: str, host: str, port: int) -> None:
    settings = settings_of(None, database_url=database_url, host=host, port=port)
    from tickwork.serve.cluster import run_process
    from tickwork.serve.cluster_admin import serve_api

    with reported_errors():
        run_process(lambda stop: serve_api(settings, role.value, stop))
