"""The Jinja2 environment: templates shipped in the package, autoescaped, with the filters
the pages share (times as ``<time>`` in UTC, converted to the viewer's zone by app.js)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from tickwork.dashboard import words
from tickwork.dashboard.states import GLYPHS, label
from tickwork.ports.web import RecentRun

_env: Environment | None = None


def environment() -> Environment:
    global _env
    if _env is None:
        _env = Environment(
            loader=PackageLoader("tickwork.dashboard", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        _env.filters.update(
            ts=ts, dur=words.duration, state=state_badge, schedule=words.schedule_words, strip=strip
        )
        _env.globals.update(glyphs=GLYPHS, between=words.between)
    return _env


def ts(value: datetime | None, style: str = "datetime") -> Markup:
    """A UTC instant as ``<time>``: readable UTC text (JS shows the viewer's zone), UTC in
    the title, so hovering always tells the instant in UTC."""
    if value is None:
        return Markup("\u2013")
    iso = value.isoformat().replace("+00:00", "Z")
    text = f"{value:%Y-%m-%d %H:%M:%S} UTC"
    return Markup(
        f'<time datetime="{escape(iso)}" data-style="{escape(style)}" title="{escape(text)}">'
        f"{escape(text)}</time>"
    )


def state_badge(state: Any, dead: bool = False) -> Markup:
    """A state as colour, glyph and word: never colour alone."""
    name = str(state)
    glyph = GLYPHS.get("dead" if dead else name, "•")
    extra = " dead" if dead else ""
    return Markup(
        f'<span class="st st-{escape(name)}{extra}" data-state="{escape(name)}">'
        f'<span class="g" aria-hidden="true">{glyph}</span> {escape(label(name, dead))}</span>'
    )


def strip(runs: Sequence[RecentRun]) -> Markup:
    """The last runs of a job as a row of small cells, oldest first: one ``<i>`` each (built
    here, not in a template macro: a page of 50 jobs has 1,000 of them)."""
    if not runs:
        return Markup("")
    said = ", ".join(str(r.state) for r in runs)
    cells = "".join(
        f'<i class="cell st-{r.state}">{GLYPHS.get(str(r.state), "")}</i>' for r in runs
    )
    return Markup(
        f'<span class="strip" role="img" aria-label="Last {len(runs)} runs, oldest first: '
        f'{said}" title="Last {len(runs)} runs, oldest first: {said}">{cells}</span>'
    )


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
