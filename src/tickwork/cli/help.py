"""Help that reads like gh's or kubectl's: every default shown, plain metavars, whole sentences.

Typer renders help with Rich. Left alone it prints ``<bool>`` beside flags and ``<str>``
beside values, writes required arguments as ``{name}``, reads ``[default: …]`` written in a
help text as a Rich style tag (and swallows it), and keeps a docstring's line breaks, so
"…, or one of" ends a command's summary. ``tidy`` fixes all of that once, over the whole
command tree, when the root command is built: a new command group needs nothing special.
"""

from __future__ import annotations

import re
from typing import Any

from rich.markup import escape

# Typer 0.29 vendors Click; its Context is the base the overridden methods are typed with.
from typer._click.core import Context as ClickContext
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

#: How a value option shows what it takes when it names no metavar, by Typer's type label.
_METAVARS = {
    "str": "TEXT",
    "int": "INT",
    "int range": "INT",
    "float": "NUMBER",
    "float range": "NUMBER",
    "list[str]": "TEXT",
    "path": "PATH",
    "file": "PATH",
    "directory": "PATH",
}


class _Option(TyperOption):
    """An option without type placeholders and with its default shown as written."""

    def display_type_rich(self, ctx: ClickContext) -> str | None:
        if self.is_flag or self.count:
            return ""
        if self.metavar is not None:
            return self.metavar
        label = self.display_type(ctx).strip("<>")
        return _METAVARS.get(label, label if "|" in label else label.upper())

    def _get_default_string(self, *, ctx: ClickContext, show_default_is_str: bool,
                            default_value: Any) -> str:  # fmt: skip
        if show_default_is_str:
            return str(self.show_default)  # Typer would wrap it in parentheses
        return super()._get_default_string(
            ctx=ctx, show_default_is_str=show_default_is_str, default_value=default_value
        )


class _Argument(TyperArgument):
    """An argument shown as ``NAME`` (usage) with no type column."""

    @property
    def display_name_raw(self) -> str:
        return self.metavar or (self.name or "arg").upper()

    def display_type_rich(self, ctx: ClickContext) -> str | None:
        return ""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


class _Command(TyperCommand):
    def get_params(self, ctx: ClickContext) -> list[Any]:
        return tidy_params(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: ClickContext) -> list[Any]:
        return tidy_params(super().get_params(ctx))


def tidy_params(params: list[Any]) -> list[Any]:
    """``params`` (help and completion options included) with their help tidied."""
    return [_tidy_param(p) for p in params]


def tidy(command: TyperCommand | TyperGroup) -> None:
    """Fix the help of ``command`` and of every command under it (see the module docstring)."""
    command.help = _prose(command.help)
    if type(command) is TyperCommand:
        command.__class__ = _Command
    elif type(command) is TyperGroup:
        command.__class__ = _Group
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            if isinstance(sub, TyperCommand | TyperGroup):
                tidy(sub)


def _tidy_param(param: Any) -> Any:
    """``param`` as one of the classes above, its help text made prose (once)."""
    if type(param) is TyperOption:
        param.__class__ = _Option
    elif type(param) is TyperArgument:
        param.__class__ = _Argument
    else:
        return param  # tidied already, or not Typer's
    param.help = _prose(param.help)
    return param


def _prose(text: str | None) -> str | None:
    """Paragraphs joined into lines Rich can wrap, with brackets shown, not read as styles."""
    if text is None:
        return None
    paragraphs = re.split(r"\n\s*\n", text.strip())
    joined = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    return escape(joined)
