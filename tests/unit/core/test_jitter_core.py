"""core.jitter: deterministic offsets of cron fires, bounded below the next fire."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.core.errors import ValidationError
from tickwork.core.jitter import (
    MAX_JITTER,
    check_jitter,
    due_at,
    effective_jitter,
    offset,
    spread_fires,
)
from tickwork.core.ledger import TickStatus, ledger
from tickwork.core.model import Job, Schedule, ScheduleKind, Task, TaskKind
from tickwork.core.schedule import upcoming
from tickwork.core.validate import validate_job

T0 = datetime(2026, 12, 1, tzinfo=UTC)

names = st.text(min_size=1, max_size=40)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
jitters = st.floats(min_value=0, max_value=MAX_JITTER, allow_nan=False)
gaps = st.integers(min_value=1, max_value=10**12)  # microseconds to the next fire


@settings(max_examples=300, deadline=None)
@given(names, instants, jitters, gaps)
def test_offset_never_reaches_the_next_fire_nor_the_jitter(
    name: str, fire: datetime, jitter: float, gap_us: int
) -> None:
    following = fire + timedelta(microseconds=gap_us)
    moved = offset(name, fire, jitter, following)
    assert timedelta(0) <= moved < following - fire
    assert moved <= timedelta(seconds=jitter)
    assert fire <= due_at(name, fire, jitter, following) < following


@settings(max_examples=200, deadline=None)
@given(names, instants, jitters, st.one_of(st.none(), gaps))
def test_offset_is_the_same_for_the_same_fire_whatever_the_zone_it_is_given_in(
    name: str, fire: datetime, jitter: float, gap_us: int | None
) -> None:
    following = None if gap_us is None else fire + timedelta(microseconds=gap_us)
    berlin = fire.astimezone(ZoneInfo("Europe/Berlin"))
    first = offset(name, fire, jitter, following)
    assert offset(name, fire, jitter, following) == first
    assert offset(name, berlin, jitter, following) == first


def test_offset_differs_between_jobs_and_between_fires() -> None:
    # A spread, not one shared delay: 50 jobs firing at one instant land on 50 instants.
    following = T0 + timedelta(hours=1)
    dues = {due_at(f"job-{i}", T0, 600, following) for i in range(50)}
    assert len(dues) == 50
    assert max(dues) - min(dues) > timedelta(seconds=300)
    per_fire = {offset("one", T0 + timedelta(hours=h), 600, None) for h in range(20)}
    assert len(per_fire) == 20


def test_zero_jitter_or_no_room_leaves_the_fire_on_the_dot() -> None:
    assert offset("a", T0, 0, None) == timedelta(0)
    assert offset("a", T0, 600, T0 + timedelta(microseconds=1)) == timedelta(0)


@settings(max_examples=100, deadline=None)
@given(names, st.sampled_from(["* * * * *", "*/5 * * * *", "0 * * * *", "30 2 * * *"]), jitters)
def test_spread_fires_keep_their_order_and_stay_between_fires(
    name: str, expr: str, jitter: float
) -> None:
    schedule = Schedule(kind=ScheduleKind.CRON, cron=expr, timezone="Europe/Berlin")
    fires = upcoming(schedule, T0, 11)
    dues = spread_fires(name, fires[:10], jitter, fires[10])
    for fire, due, following in zip(fires, dues, fires[1:], strict=False):
        assert fire <= due < following
    assert dues == sorted(dues)


def test_effective_jitter_is_the_jobs_own_else_the_fleets() -> None:
    assert effective_jitter(None, 30) == 30
    assert effective_jitter(0, 30) == 0
    assert effective_jitter(5, 30) == 5


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-1, "must be from 0 to 604800 seconds"),
        (MAX_JITTER + 1, "must be from 0 to 604800 seconds"),
        (float("nan"), "must be a number of seconds"),
        ("60", "must be a number of seconds"),
        (True, "must be a number of seconds"),
    ],
)
def test_check_jitter_refuses_naming_the_field(value: object, reason: str) -> None:
    with pytest.raises(ValidationError) as raised:
        check_jitter(value)
    assert raised.value.field == "jitter"
    assert reason in raised.value.reason


def _job(schedule: Schedule, jitter: float | None) -> Job:
    task = Task(name="main", kind=TaskKind.SHELL, config={"argv": ["true"]})
    return Job(
        id="j1",
        name="j",
        schedule=schedule,
        tasks=(task,),
        created_at=T0,
        updated_at=T0,
        jitter=jitter,
    )


def test_validate_job_takes_jitter_for_cron_only() -> None:
    cron = Schedule(kind=ScheduleKind.CRON, cron="0 * * * *")
    assert validate_job(_job(cron, 90), T0).jitter == 90.0
    at = Schedule(kind=ScheduleKind.AT, at=T0 + timedelta(days=1))
    with pytest.raises(ValidationError) as raised:
        validate_job(_job(at, 90), T0)
    assert raised.value.field == "jitter"
    assert validate_job(_job(at, None), T0).jitter is None


def test_ledger_grace_starts_after_the_jitter_window() -> None:
    # A run waiting for its jittered instant is not late while the window lasts.
    job = validate_job(_job(Schedule(kind=ScheduleKind.CRON, cron="0 * * * *"), 3600), T0)
    job = replace(job, created_at=T0 - timedelta(days=1))
    tick = T0
    now = T0 + timedelta(minutes=30)
    ticks = ledger(job, [tick], {}, now, grace=timedelta(minutes=5))
    assert ticks[0].status is TickStatus.DUE
    no_jitter = ledger(replace(job, jitter=0), [tick], {}, now, grace=timedelta(minutes=5))
    assert no_jitter[0].status is TickStatus.MISSED
    fleet = ledger(replace(job, jitter=None), [tick], {}, now, spread=3600)
    assert fleet[0].status is TickStatus.DUE
