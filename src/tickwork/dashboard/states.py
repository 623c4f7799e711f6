"""The state palette: each state has a colour (in style.css, built on Okabe and Ito's
colour-universal-design set) and a glyph, so no state is told by hue alone."""

from __future__ import annotations

GLYPHS = {
    "pending": "○",
    "scheduled": "◷",
    "queued": "≡",
    "running": "▶",
    "up_for_retry": "↻",
    "success": "✓",
    "failed": "✗",
    "upstream_failed": "⤒",
    "skipped": "»",
    "cancelled": "⊘",
    "dead": "✉",
}

#: Fill colours per state, light theme (style.css holds the same values; a test keeps them equal).
COLOURS = {
    "pending": "#ffffff",
    "scheduled": "#56B4E9",
    "queued": "#B4B4B4",
    "running": "#0072B2",
    "up_for_retry": "#F0E442",
    "success": "#009E73",
    "failed": "#D55E00",
    "upstream_failed": "#E69F00",
    "skipped": "#CC79A7",
    "cancelled": "#4D4D4D",
}

#: States whose fill is dark enough for white text; the others take dark text.
DARK_FILLS = frozenset({"running", "success", "failed", "cancelled"})


def label(state: str, dead: bool = False) -> str:
    return "dead letter" if dead else state.replace("_", " ")
