"""``tickwork up``: scheduler, worker pool and HTTP API in one process."""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.app.settings import EMBEDDED_GRACE, Settings
from tickwork.cli.common import reported_errors, settings_of
from tickwork.cli.observe_options import LogFormatOption, format_of

_DEFAULTS = Settings()

HostOption = Annotated[
    str | None,
    typer.Option(help="Address the HTTP API listens on.", show_default=_DEFAULTS.host),
]
PortOption = Annotated[
    int | None, typer.Option(help="Port of the HTTP API.", show_default=str(_DEFAULTS.port))
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option("--concurrency", min=1, help="Tasks run at once.", show_default="CPU count"),
]
HttpAllowOption = Annotated[
    str | None,
    typer.Option(
        help="Private networks http tasks may call, as CIDRs: 127.0.0.0/8,10.0.0.0/8.",
        show_default="none",
    ),
]


def up(
    ctx: typer.Context,
    *,
    host: HostOption = None,
    port: PortOption = None,
    concurrency: ConcurrencyOption = None,
    http_allow: HttpAllowOption = None,
    retention_days: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Delete finished runs older than this many days (0 keeps everything).",
            show_default="0",
        ),
    ] = None,
    grace: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds running tasks get to finish on Ctrl-C or SIGTERM.",
            show_default=f"{EMBEDDED_GRACE:.0f}",
        ),
    ] = None,
    queues: Annotated[
        str | None,
        typer.Option(
            help="Queues the workers take, comma-separated; also TICKWORK_QUEUES.",
            show_default="every queue",
        ),
    ] = None,
    log_format: LogFormatOption = None,
) -> None:
    """Start tickwork: scheduler, workers and HTTP API in one process (Ctrl-C stops it).

    Its data lives in --data-dir; every option also reads its TICKWORK_* variable and the
    config file.
    """
    settings = settings_of(
        ctx,
        host=host,
        port=port,
        concurrency=concurrency,
        http_allow=http_allow,
        retention_days=retention_days,
        grace=grace,
        queues=_queues(queues),
        log_format=format_of(log_format),
    )
    # Imported here, not at the top: every client command loads this module, and the server
    # stack (FastAPI, SQLAlchemy, uvicorn) would add about a second to each of them.
    from tickwork.runtime.targets import import_from_cwd
    from tickwork.serve.process import run_process
    from tickwork.serve.wiring import build_embedded

    import_from_cwd()  # python tasks of the project tickwork is started in

    with reported_errors():
        run_process(settings, build_embedded)


def _queues(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(q.strip() for q in value.split(",") if q.strip())
    if not names:
        from tickwork.cli.common import fail

        fail("--queues: name at least one queue (or leave it out for every queue)")
    return names
