"""``tickwork doctor``: checks this installation and prints what to fix (exit 1 on a failure)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Annotated

import typer

from tickwork.cli.common import reported_errors, settings_of
from tickwork.cli.options import Output, OutputOption
from tickwork.cli.output import is_data, print_data, print_table


def doctor(
    ctx: typer.Context,
    *,
    apis: Annotated[
        int,
        typer.Option(min=0, help="API processes you run (for the connection count)."),
    ] = 1,
    output: OutputOption = Output.TABLE,
) -> None:
    """Check the settings, the database (reachable, migrated, clock within 1 s, PostgreSQL's
    max_wal_size, autovacuum and max_connections for the processes registered), the broker
    and the admin token file's permissions, and say what to fix.

    It reads the same settings as the processes (TICKWORK_*, --config, --data-dir).
    """
    settings = settings_of(ctx)
    from tickwork.serve.doctor import diagnose

    with reported_errors():
        findings = asyncio.run(diagnose(settings, apis))
    if is_data(output):
        print_data(output, [asdict(f) for f in findings])
    else:
        print_table(
            ["check", "", "finding", "fix"],
            [(f.check, f.level.upper(), f.message, f.fix or "-") for f in findings],
        )
    if any(f.level == "fail" for f in findings):
        raise typer.Exit(1)
