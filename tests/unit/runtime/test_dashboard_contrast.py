"""WCAG AA contrast of every text/background pair the dashboard's stylesheet uses, in the
light and the dark theme, read from ``static/style.css`` itself (no browser, no CSS library).

How a pair is found, rule by rule:
- a rule that sets ``color`` (or ``fill`` on SVG text) and a background: that pair;
- ``color`` alone: that colour on each surface the text may sit on (``--bg``, ``--panel``);
- a background alone: the inherited text colour (``--fg``) on it;
- ``var(--sc)``/``var(--tc)`` (a state's colour and its glyph colour) once per state class.

A background with alpha is composed over ``--bg``. Text needs 4.5:1; large text (24px, or
18.66px bold) and UI glyphs (the state chips and cells, the live dot) need 3:1. Every state's
chip must also stand 3:1 off the page by its fill or its border (non-text contrast).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files

import pytest

CSS = (files("tickwork.dashboard") / "static" / "style.css").read_text()
STATES = ("pending", "scheduled", "queued", "running", "up_for_retry", "success", "failed",
          "upstream_failed", "skipped", "cancelled")  # fmt: skip
#: Selectors whose text is an icon standing for a state (WCAG 1.4.11: 3:1).
GLYPHS = re.compile(r"\.st \.g|\.cell|\.live\.on::before")
SURFACES = ("--bg", "--panel")

RGB = tuple[float, float, float]


@dataclass(frozen=True)
class Rule:
    selectors: tuple[str, ...]
    props: dict[str, str]


def rules(css: str) -> list[Rule]:
    """Flat rules with their declarations, those of one selector list merged in order (the
    later wins, as in the cascade); ``@media`` blocks are read as plain rules."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    css = re.sub(r"@media[^{]*\{", "", css)  # its closing brace is skipped below
    css = re.sub(r"@keyframes[^{]*\{[^{}]*\{[^}]*\}\s*\}", "", css)
    found: dict[tuple[str, ...], dict[str, str]] = {}
    for head, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        props = found.setdefault(tuple(s.strip() for s in head.split(",")), {})
        for decl in body.split(";"):
            if ":" in decl:
                name, value = decl.split(":", 1)
                props[name.strip()] = value.strip()
    return [Rule(selectors, props) for selectors, props in found.items()]


def theme(name: str) -> dict[str, str]:
    """The custom properties of ``:root`` in that theme (dark: the explicit dark override)."""
    merged: dict[str, str] = {}
    wanted = [":root"] + ([':root[data-theme="dark"]'] if name == "dark" else [])
    for selector in wanted:
        for rule in rules(CSS):
            if selector in rule.selectors:
                merged.update({k: v for k, v in rule.props.items() if k.startswith("--")})
    return merged


def state_vars(state: str) -> dict[str, str]:
    """``--sc``/``--tc`` as the rules naming ``.st-STATE`` alone set them."""
    found = {}
    for rule in rules(CSS):
        if f".st-{state}" in rule.selectors:
            found.update({k: v for k, v in rule.props.items() if k in ("--sc", "--tc")})
    return found


def resolve(value: str, env: dict[str, str]) -> str:
    for _ in range(5):
        match = re.search(r"var\((--[\w-]+)(?:,\s*([^)]+))?\)", value)
        if match is None:
            return value
        name, default = match[1], match[2]
        if name not in env and default is None:
            raise KeyError(f"{name} is not defined")
        value = value[: match.start()] + env.get(name, default or "") + value[match.end() :]
    raise ValueError(f"var() nested too deep: {value}")


def colour(text: str, under: RGB | None = None) -> RGB:
    """#rgb, #rrggbb or rgba(); alpha composed over ``under``."""
    text = text.strip()
    if text.startswith("#"):
        digits = text[1:] if len(text) == 7 else "".join(c * 2 for c in text[1:4])
        r, g, b = (int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4))
        return (r, g, b)
    match = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    assert match, f"not a colour: {text!r}"
    parts = [float(p) for p in match[1].split(",")]
    rgb = [p / 255 for p in parts[:3]]
    alpha = parts[3] if len(parts) == 4 else 1.0
    base = under or (1.0, 1.0, 1.0)
    r, g, b = (alpha * c + (1 - alpha) * u for c, u in zip(rgb, base, strict=True))
    return (r, g, b)


def luminance(rgb: RGB) -> float:
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: RGB, b: RGB) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _large(props: dict[str, str]) -> bool:
    size = re.match(r"([\d.]+)px", props.get("font-size", ""))
    px = float(size[1]) if size else 14.0
    bold = props.get("font-weight", "") in ("600", "700", "bold")
    return px >= 24 or (bold and px >= 18.66)


def _text_colour(rule: Rule) -> str | None:
    if "color" in rule.props:
        return rule.props["color"]
    last = rule.selectors[0].split()[-1] if rule.selectors else ""
    if "fill" in rule.props and (last == "text" or last.endswith(".muted")):
        return rule.props["fill"]
    return None


def _background(rule: Rule) -> str | None:
    value = rule.props.get("background-color") or rule.props.get("background")
    if value is None or not (value.startswith(("#", "rgb", "var("))):
        return None  # none, gradients, url(): no colour to check
    return value


def pairs(name: str) -> list[tuple[str, str, str, float]]:
    """(where, text colour, background, needed ratio) for the theme ``name``."""
    env = theme(name)
    found = []
    for rule in rules(CSS):
        if any(s.startswith(":root") for s in rule.selectors):
            continue
        fg, bg = _text_colour(rule), _background(rule)
        if fg is None and bg is None:
            continue
        needed = 3.0 if _large(rule.props) or GLYPHS.search(" ".join(rule.selectors)) else 4.5
        fgs = [fg or "var(--fg)"]
        bgs = [bg] if bg is not None else [f"var({s})" for s in SURFACES]
        variants = [{}] if "--sc" not in f"{fgs}{bgs}" and "--tc" not in f"{fgs}{bgs}" else [
            {**state_vars(s), "state": s} for s in STATES
        ]  # fmt: skip
        for local in variants:
            scope = {**env, **{k: v for k, v in local.items() if k.startswith("--")}}
            for f in fgs:
                for b in bgs:
                    where = ", ".join(rule.selectors) + (f" [{local['state']}]" if local else "")
                    found.append((where, resolve(f, scope), resolve(b, scope), needed))
    return found


@pytest.mark.parametrize("name", ["light", "dark"])
def test_every_text_and_background_pair_meets_aa(name: str) -> None:
    page = colour(theme(name)["--bg"])
    found = pairs(name)
    assert len(found) > 40  # the audit reads the real stylesheet, not an empty one
    failing = []
    for where, fg, bg, needed in found:
        behind = colour(bg, page)
        ratio = contrast(colour(fg, behind), behind)
        if ratio < needed:
            failing.append(f"{where}: {fg} on {bg} is {ratio:.2f}:1, needs {needed}:1")
    assert failing == []


@pytest.mark.parametrize("name", ["light", "dark"])
def test_every_state_chip_stands_off_the_page(name: str) -> None:
    env = theme(name)
    page, border = colour(env["--bg"]), colour(env["--s-border"])
    assert contrast(border, page) >= 3.0
    for state in STATES:
        fill = colour(resolve(state_vars(state)["--sc"], env), page)
        assert max(contrast(fill, page), contrast(border, page)) >= 3.0, state


def test_the_dark_theme_is_the_same_by_system_setting_and_by_choice() -> None:
    by_system = [r for r in rules(CSS) if ':root:not([data-theme="light"])' in r.selectors]
    assert len(by_system) == 1
    chosen = theme("dark")
    assert all(chosen[k] == v for k, v in by_system[0].props.items())


def test_the_audit_catches_a_failing_pair() -> None:
    # Grey #999 on white is 2.85:1: the audit must see it.
    assert contrast(colour("#999999"), colour("#ffffff")) == pytest.approx(2.85, abs=0.01)
    assert contrast(colour("#000"), colour("#fff")) == pytest.approx(21.0)
    half = colour("rgba(0,0,0,.5)", (1.0, 1.0, 1.0))
    assert half == pytest.approx((0.5, 0.5, 0.5))
