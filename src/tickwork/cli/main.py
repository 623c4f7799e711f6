"""The ``tickwork`` command: the processes (``up``, ``scheduler``, ``worker``, ``api``) and
the client command groups.

To add a command group: write it in its own module as ``app = typer.Typer(help=...)`` with
commands that take ``ctx: typer.Context`` and talk to the server through
``cli.common.connect(ctx)``, then register it here with one line in ``GROUPS``. The global
options (``--url``, ``--token``, ``--data-dir``, ``--config``, ``-o``) reach it in any
position, and its help is tidied with everyone else's (``cli/help.py``); the help test
(``tests/cli/test_help.py``) holds every command to showing its defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from tickwork import __version__
from tickwork.cli import (
    backfills,
    cluster,
    doctor,
    jobs,
    pools,
    runs,
    schedule,
    secrets,
    status,
    tokens,
)
from tickwork.cli.api import api
from tickwork.cli.options import GLOBAL_PANEL, GlobalGroup, Globals, Output, remember
from tickwork.cli.up import up

app = typer.Typer(
    name="tickwork",
    cls=GlobalGroup,
    help=f"tickwork {__version__}: run jobs now, at an instant, or on a cron schedule.",
    no_args_is_help=True,
    # Expected failures print one line (see cli.common); a traceback means a bug.
    pretty_exceptions_show_locals=False,
)

#: Processes: each runs until SIGTERM or Ctrl-C.
PROCESSES: dict[str, Callable[..., None]] = {
    "up": up,
    "scheduler": cluster.scheduler,
    "worker": cluster.worker,
    "api": api,
    "status": status.status,
    "doctor": doctor.doctor,
}
#: Command groups, by name.
GROUPS: dict[str, typer.Typer] = {
    "job": jobs.app,
    "run": runs.app,
    "pool": pools.app,
    "schedule": schedule.app,
    "token": tokens.app,
    "db": cluster.db,
    "backfill": backfills.app,
    "secret": secrets.app,
}
for _name, _command in PROCESSES.items():
    app.command(_name)(_command)
for _name, _group in GROUPS.items():
    app.add_typer(_group, name=_name)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tickwork {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    *,
    url: Annotated[
        str | None,
        typer.Option(
            help="Server the client commands talk to (also TICKWORK_URL, or url in the "
            "config file).",
            show_default="http://127.0.0.1:8080",
            rich_help_panel=GLOBAL_PANEL,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Bearer token (also TICKWORK_TOKEN, or token in the config file).",
            show_default="the data dir's admin.token",
            rich_help_panel=GLOBAL_PANEL,
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where `tickwork up` keeps its SQLite database and writes admin.token "
            "(also TICKWORK_DATA_DIR).",
            show_default=".tickwork",
            rich_help_panel=GLOBAL_PANEL,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="TOML file of settings: keys as in TICKWORK_* without the prefix, in lower "
            "case (also TICKWORK_CONFIG).",
            show_default="none",
            rich_help_panel=GLOBAL_PANEL,
        ),
    ] = None,
    output: Annotated[
        Output,
        typer.Option(
            "-o",
            "--output",
            help="table or wide for people (wide: every column), json or yaml for scripts.",
            rich_help_panel=GLOBAL_PANEL,
        ),
    ] = Output.TABLE,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Run jobs now, at an instant, or on a cron schedule.

    Every setting is read from its option, else its TICKWORK_* variable, else the config file.
    """
    remember(ctx, Globals(url, token, data_dir, config, output))


def main() -> None:
    """Console entry point (``tickwork``)."""
    app(prog_name="tickwork")
