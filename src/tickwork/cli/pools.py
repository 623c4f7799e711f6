"""``tickwork pool set | list | delete``: named slot limits that tasks declare (``pool:``).

Pools are operator settings: changing one needs an admin token, reading one a read token.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.common import (
    DEFAULT_OUTPUT,
    DEFAULT_URL,
    Output,
    OutputOption,
    UrlOption,
    connect,
)
from tickwork.cli.complete import complete_pool
from tickwork.cli.output import emit, is_data, print_data, print_table

app = typer.Typer(help="Create, resize, list and delete pools.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(help="The pool's name.", autocompletion=complete_pool)]


@app.command("set")
def set_pool(
    ctx: typer.Context,
    name: NameArg,
    *,
    slots: Annotated[int, typer.Option("--slots", help="Slots tasks may hold at once.")],
    description: Annotated[
        str | None, typer.Option(help="What the pool guards.", show_default="kept as it is")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    output: OutputOption = DEFAULT_OUTPUT,
) -> None:
    """Create a pool, or change its slots and description.

    Example: `pool set db --slots 4 --description "the warehouse"`. Shrinking a pool takes no
    slot back from running tasks; new ones wait until there is room."""
    with connect(ctx, url) as client:
        pool = client.set_pool(name, slots, description)
    emit(output, pool, f"pool {pool['name']}: {pool['slots']} slots ({pool['used']} in use)")


@app.command("list")
def list_pools(
    ctx: typer.Context, url: UrlOption = DEFAULT_URL, output: OutputOption = DEFAULT_OUTPUT
) -> None:
    """List pools with the slots in use."""
    with connect(ctx, url) as client:
        pools = client.list_pools()
    if is_data(output):
        print_data(output, pools)
        return
    rows = [(p["name"], p["slots"], p["used"], p["description"] or None) for p in pools]
    print_table(("name", "slots", "used", "description"), rows, empty="no pools")


@app.command("delete")
def delete_pool(ctx: typer.Context, name: NameArg, url: UrlOption = DEFAULT_URL) -> None:
    """Delete a pool. Tasks that declare it wait until a pool of that name exists again."""
    with connect(ctx, url) as client:
        client.delete_pool(name)
    emit(Output.TABLE, None, f"deleted pool {name}")
