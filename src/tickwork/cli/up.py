"""``tickwork up``: scheduler, worker pool and HTTP API in one process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tickwork.app.settings import EmbeddedSettings
from tickwork.cli.common import reported_errors

_DEFAULTS = EmbeddedSettings()


def up(
    data_dir: Annotated[
        Path,
        typer.Option(
            envvar="TICKWORK_DATA_DIR",
            help="Where the SQLite database and the first admin token (admin.token) live.",
        ),
    ] = _DEFAULTS.data_dir,
    host: Annotated[str, typer.Option(help="Address the HTTP API listens on.")] = _DEFAULTS.host,
    port: Annotated[int, typer.Option(help="Port of the HTTP API.")] = _DEFAULTS.port,
    workers: Annotated[
        int, typer.Option(min=1, help="Tasks run at once [default: CPU count].", show_default=False)
    ] = _DEFAULTS.workers,
    http_allow: Annotated[
        str,
        typer.Option(
            envvar="TICKWORK_HTTP_ALLOW",
            help="Private networks http tasks may call, as CIDRs: 127.0.0.0/8,10.0.0.0/8.",
        ),
    ] = _DEFAULTS.http_allow,
    *,
    retention_days: Annotated[
        int | None,
        typer.Option(
            envvar="TICKWORK_RETENTION_DAYS",
            min=1,
            help="Delete finished runs older than this many days [default: keep everything].",
            show_default=False,
        ),
    ] = _DEFAULTS.retention_days,
) -> None:
    """Start tickwork: scheduler, workers and HTTP API in one process (Ctrl-C stops it)."""
    settings = EmbeddedSettings(
        data_dir=data_dir,
        host=host,
        port=port,
        workers=workers,
        http_allow=http_allow,
        retention_days=retention_days,
    )
    # Imported here, not at the top: every client command loads this module, and the server
    # stack (FastAPI, SQLAlchemy, uvicorn) would add about a second to each of them.
    from tickwork.runtime.targets import import_from_cwd
    from tickwork.serve.embedded import run_embedded

    import_from_cwd()  # python tasks of the project tickwork is started in

    with reported_errors():
        run_embedded(settings)
