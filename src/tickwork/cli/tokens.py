"""``tickwork token create | list | revoke``: API tokens, through the API (admin token)."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from tickwork.cli.common import DEFAULT_OUTPUT, DEFAULT_URL, OutputOption, UrlOption, connect
from tickwork.cli.output import is_data, print_data, print_table, when

app = typer.Typer(
    help="Create, list and revoke API tokens (needs an admin token).", no_args_is_help=True
)


class ScopeChoice(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Unique among live tokens.")],
    scope: Annotated[ScopeChoice, typer.Option("--scope", help="read < write < admin.")],
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Create a token and print its secret (shown this once)."""
    with connect(ctx, url) as client:
        created = client.create_token(name, scope.value)
    if is_data(output):
        print_data(output, created)
        return
    sys.stdout.write(created["secret"] + "\n")
    sys.stderr.write(
        f"token {created['id']} ({created['name']}, {created['scope']}): "
        "store the secret now; it is not shown again\n"
    )


@app.command("list")
def list_tokens(
    ctx: typer.Context, url: UrlOption = DEFAULT_URL, output: OutputOption = DEFAULT_OUTPUT
) -> None:
    """List tokens (never their secrets)."""
    with connect(ctx, url) as client:
        tokens = client.list_tokens()
    if is_data(output):
        print_data(output, tokens)
        return
    rows = [
        (t["id"], t["name"], t["scope"], when(t["created_at"]), when(t["last_used_at"]),
         when(t["revoked_at"]))
        for t in tokens
    ]  # fmt: skip
    header = ("id", "name", "scope", "created", "last used", "revoked")
    print_table(header, rows, empty="no tokens")


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    token: Annotated[str, typer.Argument(help="Token id or name.")],
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Revoke a token; it stops working within about a second."""
    with connect(ctx, url) as client:
        revoked = client.revoke_token(token)
    if is_data(output):
        print_data(output, revoked)
        return
    sys.stdout.write(f"revoked token {revoked['id']} ({revoked['name']})\n")
