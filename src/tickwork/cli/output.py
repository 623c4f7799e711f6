"""Printing results: rich tables for people, JSON or YAML for scripts."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tickwork.cli.render import Col, Markup, fit

#: Width of tables written to a pipe or file, where no terminal says how wide to be: wide
#: enough that ids and instants never fold, so `| grep` sees whole rows.
PIPE_WIDTH = 200


def console() -> Console:
    """A console on the current stdout (looked up per call, so test runners can capture it),
    as wide as ``COLUMNS`` says, else the terminal, else ``PIPE_WIDTH``."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        width: int | None = int(columns)
    else:
        width = None if sys.stdout.isatty() else PIPE_WIDTH
    return Console(file=sys.stdout, highlight=False, soft_wrap=False, width=width)


def print_json(data: Any) -> None:
    """The API's JSON, as-is, for scripts."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def is_data(output: str) -> bool:
    """Whether ``-o`` asks for data (json, yaml) rather than text for people."""
    return output in ("json", "yaml")


def print_data(output: str, data: Any) -> None:
    """``data`` as JSON (``-o json``) or YAML (``-o yaml``), the API's field names as-is."""
    if output == "yaml":
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        print_json(data)


def emit(output: str, data: Any, line: str) -> None:
    """The result of a command: ``data`` for ``-o json|yaml``, else one line for people."""
    if is_data(output):
        print_data(output, data)
    else:
        print_line(line)


def print_table(
    columns: Sequence[str | Col],
    rows: Iterable[Sequence[object]],
    title: str = "",
    empty: str = "",
    wide: bool = False,
) -> None:
    """A table that fits the terminal: columns give way by priority (``Col.drop``) unless
    ``wide``; the first column (an id or a name) never wraps. ``empty``: said for no rows."""
    cols = [c if isinstance(c, Col) else Col(c) for c in columns]
    cells = [[v if isinstance(v, Markup) else escape(_cell(v)) for v in row] for row in rows]
    if not cells and empty:
        print_line(empty)
        return
    out = console()
    keep = fit(cols, cells, out.width, wide)
    table = Table(title=title or None, title_justify="left", show_edge=False, pad_edge=False)
    for i in keep:
        table.add_column(cols[i].name, no_wrap=i == 0, overflow="fold")
    for row in cells:
        table.add_row(*(row[i] for i in keep))
    out.print(table)


def print_fields(fields: Mapping[str, object]) -> None:
    """``key  value`` lines, aligned."""
    width = max((len(k) for k in fields), default=0)
    out = console()
    for key, value in fields.items():
        out.print(f"[bold]{escape(key.ljust(width))}[/bold]  {escape(_cell(value))}")


def print_line(text: str) -> None:
    """One line for people (no markup interpretation)."""
    console().print(text, markup=False)


def when(instant: str | None) -> str:
    """An ISO instant, shortened for a table: ``2026-12-01 10:00:00Z``."""
    if not instant:
        return "-"
    date_part, _, time_part = instant.partition("T")
    clock = time_part[:8]
    return f"{date_part} {clock}{_offset(time_part)}" if clock else date_part


def _offset(time_part: str) -> str:
    if time_part.endswith("Z"):
        return "Z"
    for sign in "+-":
        if sign in time_part:
            return sign + time_part.rsplit(sign, 1)[1]
    return ""


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)
