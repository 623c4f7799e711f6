"""Every command's ``--help``: a default for every option, no type placeholders, whole
sentences. New command groups are held to it as soon as ``cli/main.py`` registers them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from tickwork.cli.main import app

ROOT = typer.main.get_command(app)
PLACEHOLDER = re.compile(r"<(bool|str|int|float|path|list\[\w+\])[^>]*>|\{[a-z_]+\}")


def _commands(
    command: Any = ROOT, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands())


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p) or "tickwork")
def test_help_shows_defaults_and_no_placeholders(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert not PLACEHOLDER.search(result.stdout), result.stdout
    command = COMMANDS[path]
    with typer.Context(command) as ctx:
        params = command.get_params(ctx)
    for param in params:
        if param.param_type_name != "option" or param.hidden or param.required:
            continue
        if param.is_flag and not param.secondary_opts:
            continue  # a lone flag is off unless given
        shown = isinstance(param.show_default, str) or (
            param.default is not None and param.show_default is not False
        )
        assert shown, f"{' '.join(path)} {param.opts[0]}: no default in its help"
        assert "[default" not in (param.help or ""), "use show_default=, Rich reads [..] as style"


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p) or "tickwork")
def test_help_sentences_are_not_broken_across_lines(path: tuple[str, ...]) -> None:
    text = COMMANDS[path].help or ""
    for paragraph in text.split("\n\n"):
        assert "\n" not in paragraph, f"{path}: {paragraph!r}"
    assert text, f"{' '.join(path) or 'tickwork'} has no help"


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"tickwork \d+\.\d+\.\d+\S*\n", result.stdout)
