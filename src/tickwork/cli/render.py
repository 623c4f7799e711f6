"""How values look in a table for people: short ids, relative times, states with a colour and
a symbol (the symbol stays when colour is off), and columns that give way on narrow terminals.

``-o wide`` shows what a narrow table leaves out: every column, whole ids, absolute instants.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich.markup import escape
from rich.text import Text

#: Characters of an id shown in tables: the end of it, which is random (the start is the
#: creation time, shared by everything made in the same second). 8 hex digits tell apart
#: the runs of a busy day; commands accept them (see ``cli.ids``).
SHORT_ID = 8

#: (symbol, style) of each state; the symbol says it without colour too.
STATES = {
    "success": ("✓", "green"),
    "failed": ("✗", "red"),
    "dead": ("✗", "red"),
    "upstream_failed": ("✗", "red dim"),
    "cancelled": ("⊘", "yellow"),
    "running": ("▶", "blue"),
    "queued": ("•", "cyan"),
    "scheduled": ("◷", "dim"),
    "up_for_retry": ("↻", "yellow"),
    "skipped": ("↷", "dim"),
    "waiting": ("…", "dim"),
}


class Markup(str):
    """A table cell written in Rich markup (any other cell is shown as-is)."""


@dataclass(frozen=True, slots=True)
class Col:
    """A table column. ``drop``: 0 never goes; on a narrow terminal the highest goes first.
    ``wide``: shown only with ``-o wide``."""

    name: str
    drop: int = 0
    wide: bool = False


def short_id(value: str, wide: bool = False) -> str:
    return value if wide or len(value) <= SHORT_ID else value[-SHORT_ID:]


def state(value: str) -> Markup:
    """``✓ success`` in green."""
    symbol, style = STATES.get(value, ("?", ""))
    text = f"{symbol} {escape(value)}"
    return Markup(f"[{style}]{text}[/]" if style else text)


def strip(states: Iterable[str]) -> Markup:
    """States as their coloured symbols side by side: ``✓✓✗▶``."""
    parts = []
    for value in states:
        symbol, style = STATES.get(value, ("?", ""))
        parts.append(f"[{style}]{symbol}[/]" if style else symbol)
    return Markup("".join(parts) or "-")


def ago(instant: str | None, now: datetime | None = None) -> str:
    """``12s ago``, ``5m ago``, ``3h ago``, ``2d ago``, or ``in 5m`` for the future."""
    if not instant:
        return "-"
    then = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    seconds = ((now or datetime.now(UTC)) - then).total_seconds()
    span = _span(abs(seconds))
    return f"in {span}" if seconds < 0 else f"{span} ago"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def fit(columns: Sequence[Col], rows: Sequence[Sequence[str]], width: int, wide: bool) -> list[int]:
    """Indexes of the columns to show: all with ``wide``; else the non-wide ones, dropping
    the highest ``drop`` first (then the rightmost) until the table fits ``width``."""
    keep = [i for i, c in enumerate(columns) if wide or not c.wide]
    if wide:
        return keep
    widths = {i: _natural(columns[i].name, [r[i] for r in rows]) for i in keep}
    while _total(widths, keep) > width:
        droppable = [i for i in keep if columns[i].drop > 0]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    return keep


def _natural(header: str, cells: Sequence[str]) -> int:
    return max([len(header), *(Text.from_markup(c).cell_len for c in cells)])


def _total(widths: dict[int, int], keep: list[int]) -> int:
    return sum(widths[i] for i in keep) + 3 * (len(keep) - 1)
