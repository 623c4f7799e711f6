"""core.autoscale: the worker's concurrency from its backlog, busy slots and task durations."""

from __future__ import annotations

import re

import pytest

from tickwork.core.autoscale import Bounds, decide, parse_bounds, wanted
from tickwork.core.errors import ValidationError

B = Bounds(2, 16)


def test_bounds_parse_min_colon_max() -> None:
    assert parse_bounds("2:16") == Bounds(2, 16)
    assert parse_bounds(" 3 : 3 ") == Bounds(3, 3)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("8", "must be MIN:MAX"),
        ("a:4", "whole numbers"),
        ("2:", "whole numbers"),
        ("0:4", "MIN must be 1 or more, not 0"),
        ("-1:4", "MIN must be 1 or more"),
        ("5:4", "MAX must be MIN (5) or more, not 4"),
    ],
)
def test_bad_bounds_name_the_field_and_why(text: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(reason)) as refused:
        parse_bounds(text)
    assert refused.value.field == "autoscale"


def test_long_tasks_want_a_slot_each_short_ones_few() -> None:
    assert wanted(busy=4, backlog=20, avg_duration=30.0) == 24
    assert wanted(busy=4, backlog=20, avg_duration=0.01) == 1  # 0.24 s of work in all
    assert wanted(busy=0, backlog=10, avg_duration=1.0) == 5  # 10 s of work within 2 s
    assert wanted(busy=0, backlog=0, avg_duration=5.0) == 0


def test_a_backlog_grows_it_at_once_up_to_max() -> None:
    assert decide(2, B, busy=2, backlog=6, avg_duration=10.0) == 8
    assert decide(2, B, busy=2, backlog=500, avg_duration=10.0) == 16


def test_idle_shrinks_it_half_way_per_decision_down_to_min() -> None:
    steps = [16]
    while steps[-1] > B.low:
        steps.append(decide(steps[-1], B, busy=0, backlog=0, avg_duration=1.0))
    assert steps == [16, 8, 4, 2]
    assert decide(2, B, busy=0, backlog=0, avg_duration=1.0) == 2


def test_shrinking_stops_half_way_to_the_work_in_sight() -> None:
    assert decide(16, B, busy=0, backlog=4, avg_duration=10.0) == 10  # wants 4: 16 -> 10


def test_it_never_shrinks_below_its_busy_slots() -> None:
    # Running tasks are short (0.1 s each): 10 of them want one slot, yet 10 run now.
    assert decide(16, B, busy=10, backlog=0, avg_duration=0.1) == 10


def test_enough_slots_for_the_work_in_sight_stay() -> None:
    assert decide(8, B, busy=8, backlog=0, avg_duration=5.0) == 8
    assert decide(4, Bounds(4, 4), busy=0, backlog=100, avg_duration=60.0) == 4
