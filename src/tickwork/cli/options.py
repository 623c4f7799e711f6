"""The global options (``--url``, ``--token``, ``--data-dir``, ``--config``, ``-o``): taken in
any position, the way kubectl and gh take theirs.

``tickwork job list --token X``, ``tickwork --token X job list`` and ``tickwork job --token X
list`` mean the same: before Click parses anything, ``GlobalGroup`` moves every global option
(up to a ``--``) to the front, where the root command reads it. A command that shows one of
them in its own help (``UrlOption``, ``OutputOption``) gets the root's value through a
callback, so its code reads a plain parameter.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

# Typer 0.29 vendors Click; its Context is the base the overridden methods are typed with.
from typer._click.core import Context as ClickContext
from typer.core import TyperGroup

from tickwork.app.settings import DEFAULT_URL, Settings, load_settings
from tickwork.cli.help import tidy, tidy_params
from tickwork.core.errors import TickworkError, ValidationError

#: The global options that take a value (all of them do).
VALUED = frozenset({"--url", "--token", "--data-dir", "--config", "--output", "-o"})
_META = "tickwork.globals"
GLOBAL_PANEL = "Global options (any position)"


class Output(StrEnum):
    """How a command prints its result."""

    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"


def hoist(args: Sequence[str]) -> list[str]:
    """``args`` with every global option (and its value) moved to the front, in order.

    Nothing after a ``--`` moves: that is a task's own command line."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.partition("=")[0]
        if name in VALUED and "=" not in arg and i + 1 < len(args):
            front += [arg, args[i + 1]]
            i += 2
            continue
        if name in VALUED or (arg.startswith("-o") and not arg.startswith("--")):
            front.append(arg)  # --url=X, -ojson, or a last option Click reports as bare
        else:
            rest.append(arg)
        i += 1
    return front + rest


class GlobalGroup(TyperGroup):
    """The root command: hoists the global options, then tidies every command's help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy(self)

    def get_params(self, ctx: ClickContext) -> list[Any]:
        return tidy_params(super().get_params(ctx))

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist(args) if ctx.parent is None else args)


@dataclass(frozen=True, slots=True)
class Globals:
    """What the root command was given; None: not on the command line."""

    url: str | None = None
    token: str | None = None
    data_dir: Path | None = None
    config: Path | None = None
    output: Output = Output.TABLE


def remember(ctx: typer.Context, given: Globals) -> None:
    ctx.meta[_META] = given


def globals_of(ctx: typer.Context) -> Globals:
    found = ctx.meta.get(_META)
    return found if isinstance(found, Globals) else Globals()


def settings_of(ctx: typer.Context, **overrides: Any) -> Settings:
    """The settings of this invocation: options, then ``TICKWORK_*``, then the config file."""
    given = globals_of(ctx)
    try:
        return load_settings(
            given.config,
            url=given.url,
            token=given.token,
            data_dir=given.data_dir,
            **overrides,
        )
    except ValidationError as e:
        fail(f"{e.field}: {e.reason}")
    except TickworkError as e:
        fail(str(e))


def fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with status 1."""
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(1)


def _url_of(ctx: typer.Context, value: str) -> str:
    return settings_of(ctx).url


def _output_of(ctx: typer.Context, value: Output) -> Output:
    return globals_of(ctx).output


UrlOption = Annotated[
    str,
    typer.Option(
        "--url",
        help="Server URL (also TICKWORK_URL, or url in the config file).",
        callback=_url_of,
        rich_help_panel=GLOBAL_PANEL,
    ),
]
OutputOption = Annotated[
    Output,
    typer.Option(
        "-o",
        "--output",
        help="table or wide for people (wide: every column), json or yaml for scripts.",
        callback=_output_of,
        rich_help_panel=GLOBAL_PANEL,
    ),
]
DEFAULT_OUTPUT = Output.TABLE
__all__ = ["DEFAULT_URL"]
