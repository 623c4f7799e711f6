"""``tickwork secret set | list | delete``: secrets, through the API (admin token).

``set`` reads the value from stdin (or ``--file``), never from the command line, where it
would land in the shell history and in ``ps``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tickwork.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    OutputOption,
    UrlOption,
    connect,
    fail,
)
from tickwork.cli.output import is_data, print_data, print_table, when

app = typer.Typer(help="Set, list and delete secrets (needs an admin token).", no_args_is_help=True)


@app.command("set")
def set_secret(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help='The name tasks use: {"$secret": NAME}.')],
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Read the value from this file.", show_default="stdin"),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Create or replace a secret; the value comes from stdin (one trailing newline is
    dropped) or --file (taken as it is). It is encrypted at rest and never shown again."""
    if file is not None:
        try:
            value = file.read_text()
        except OSError as e:
            fail(f"--file: cannot read {file}: {e.strerror}")
    else:
        if sys.stdin.isatty():
            sys.stderr.write(f"value of secret {name} (then Ctrl-D): ")
            sys.stderr.flush()
        value = sys.stdin.read().removesuffix("\n")
    if not value:
        fail("the secret's value is empty")
    with connect(ctx, url) as client:
        info = client.set_secret(name, value)
    if is_data(output):
        print_data(output, info)
        return
    sys.stdout.write(f'secret {info["name"]} set; refer to it as {{"$secret": "{name}"}}\n')


@app.command("list")
def list_secrets(
    ctx: typer.Context, url: UrlOption = DEFAULT_URL, output: OutputOption = DEFAULT_OUTPUT
) -> None:
    """List secrets by name (never their values)."""
    with connect(ctx, url) as client:
        secrets = client.list_secrets()
    if is_data(output):
        print_data(output, secrets)
        return
    rows = [(s["name"], when(s["created_at"]), when(s["updated_at"])) for s in secrets]
    print_table(("name", "created", "updated"), rows, empty="no secrets")


@app.command("delete")
def delete_secret(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The secret's name.")],
    url: UrlOption = DEFAULT_URL,
) -> None:
    """Delete a secret; tasks that refer to it fail their next attempt, naming it."""
    with connect(ctx, url) as client:
        client.delete_secret(name)
    sys.stdout.write(f"deleted secret {name}\n")
