"""The ``tickwork`` command: ``up`` plus client commands for jobs, runs, pools and schedules."""

from __future__ import annotations

import typer

from tickwork import __version__
from tickwork.cli import cluster, jobs, pools, runs, schedule, tokens
from tickwork.cli.api import api
from tickwork.cli.up import up

app = typer.Typer(
    name="tickwork",
    help=f"tickwork {__version__}: run jobs now, at an instant, or on a cron schedule.",
    no_args_is_help=True,
    # Expected failures print one line (see cli.common); a traceback means a bug.
    pretty_exceptions_show_locals=False,
)
app.command("up")(up)
app.command("api")(api)
app.command("scheduler")(cluster.scheduler)
app.command("worker")(cluster.worker)
app.command("status")(cluster.status)
app.add_typer(cluster.db, name="db")
app.add_typer(jobs.app, name="job")
app.add_typer(runs.app, name="run")
app.add_typer(pools.app, name="pool")
app.add_typer(schedule.app, name="schedule")
app.add_typer(tokens.app, name="token")
app.callback()(tokens.token_option)


def main() -> None:
    """Console entry point (``tickwork``)."""
    app(prog_name="tickwork")
