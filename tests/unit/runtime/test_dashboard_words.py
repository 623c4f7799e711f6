"""Plain-language schedules and the state palette of the dashboard."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tickwork.core.model import Schedule, ScheduleKind
from tickwork.dashboard.states import COLOURS, GLYPHS
from tickwork.dashboard.words import cron_words, dst_change, duration, schedule_words


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("0 9 * * 1-5", "at 09:00 on weekdays"),
        ("0 9 * * MON-FRI", "at 09:00 on weekdays"),
        ("* * * * *", "every minute"),
        ("*/5 * * * *", "every 5 minutes"),
        ("15 * * * *", "every hour at minute 15"),
        ("30 2 1 * *", "at 02:30 on day 1 of the month"),
        ("0 8,20 * * 0,6", "at 08:00, 20:00 on weekends"),
        ("0 9 * * 1,3", "at 09:00 on Monday, Wednesday"),
        ("0 9 L * *", "cron 0 9 L * *"),
    ],
)
def test_cron_in_words(expr: str, words: str) -> None:
    assert cron_words(expr) == words


def test_schedule_words_name_the_zone() -> None:
    berlin = Schedule(kind=ScheduleKind.CRON, cron="0 9 * * 1-5", timezone="Europe/Berlin")
    assert schedule_words(berlin) == "at 09:00 on weekdays, Europe/Berlin"


def test_dst_nights_are_marked() -> None:
    spring = datetime(2026, 3, 29, 9, 0, tzinfo=UTC)  # Europe/Berlin springs forward that night
    assert dst_change(spring, "Europe/Berlin")
    assert not dst_change(datetime(2026, 3, 30, 9, 0, tzinfo=UTC), "Europe/Berlin")
    assert not dst_change(spring, "UTC")


def test_durations_read_well() -> None:
    assert [duration(s) for s in (0.25, 3.14, 125, 7500, 200_000)] == [
        "250 ms", "3.1 s", "2 min 5 s", "2 h 5 min", "2 d 7 h"
    ]  # fmt: skip


def test_every_state_has_a_glyph_and_the_css_the_same_colour() -> None:
    css = (Path(__file__).parents[3] / "src/tickwork/dashboard/static/style.css").read_text()
    assert len(set(GLYPHS.values())) == len(GLYPHS)
    for state, colour in COLOURS.items():
        assert state in GLYPHS
        assert f"--s-{state}: {colour};" in css


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_glyphs_on_state_chips_have_3_to_1_contrast() -> None:
    white_glyph = {"running", "success", "failed", "cancelled"}
    for state, colour in COLOURS.items():
        glyph = "#ffffff" if state in white_glyph else "#000000"
        hi, lo = sorted((_luminance(colour), _luminance(glyph)), reverse=True)
        assert (hi + 0.05) / (lo + 0.05) >= 3.0, state
