"""Schedule validation, first/upcoming fires, and catch-up planning."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.core.errors import ValidationError
from tickwork.core.model import Job, RunTrigger, Schedule, ScheduleKind
from tickwork.core.schedule import (
    first_fire,
    plan_ahead,
    plan_fires,
    upcoming,
    validate_schedule,
)

NOW = datetime(2026, 6, 15, 12, 0, 30, tzinfo=UTC)
CRON, AT, NOW_KIND = ScheduleKind.CRON, ScheduleKind.AT, ScheduleKind.NOW


def cron(expr: str = "0 * * * *", tz: str = "UTC", **bounds: datetime) -> Schedule:
    return Schedule(kind=CRON, cron=expr, timezone=tz, **bounds)


def job(schedule: Schedule, next_fire_at: datetime, *, catchup: bool = False) -> Job:
    return Job(
        id="j1",
        name="nightly",
        schedule=schedule,
        tasks=(),
        created_at=NOW,
        updated_at=NOW,
        catchup=catchup,
        next_fire_at=next_fire_at,
    )


def refused(s: Schedule, **options: bool) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        validate_schedule(s, NOW, **options)
    return caught.value


# -- validate_schedule -----------------------------------------------------------------------


def test_validate_cron_normalizes_expression_and_bounds_to_utc() -> None:
    berlin = timezone(timedelta(hours=2))
    s = cron(
        " 0  9 * * mon-fri ",
        "Europe/Berlin",
        start=datetime(2026, 7, 1, 9, tzinfo=berlin),
        end=datetime(2026, 8, 1, tzinfo=UTC),
    )
    v = validate_schedule(s, NOW)
    assert (v.cron, v.start) == ("0 9 * * MON-FRI", datetime(2026, 7, 1, 7, tzinfo=UTC))
    assert v.start is not None and v.start.tzinfo is UTC


@pytest.mark.parametrize(
    ("s", "field", "says"),
    [
        (cron("61 * * * *"), "schedule.cron", "out of range"),
        (cron(""), "schedule.cron", "needs an expression"),
        (Schedule(kind=CRON), "schedule.cron", "needs an expression"),
        (cron(tz="Mars/Base"), "schedule.timezone", "not an IANA time zone"),
        (cron("0 0 30 2 *"), "schedule.cron", "never fires"),
        (replace(cron(), at=NOW), "schedule.at", "takes no `at`"),
        (cron(start=datetime(2026, 7, 1)), "schedule.start", "UTC offset"),
        (cron(start=NOW, end=NOW), "schedule.end", "later than schedule.start"),
        (cron(end=NOW - timedelta(days=1)), "schedule.end", "ends before its next fire"),
        (Schedule(kind=AT), "schedule.at", "needs an instant"),
        (Schedule(kind=AT, at=datetime(2027, 1, 1)), "schedule.at", "UTC offset"),
        (Schedule(kind=AT, at=NOW, cron="* * * * *"), "schedule.cron", "only cron"),
        (Schedule(kind=AT, at=NOW, end=NOW), "schedule.end", "only cron"),
        (Schedule(kind=AT, at=NOW, timezone="Europe/Berlin"), "schedule.timezone", "only cron"),
        (Schedule(kind=NOW_KIND, at=NOW), "schedule.at", "takes no instant"),
        (Schedule(kind=NOW_KIND, start=NOW), "schedule.start", "only cron"),
        (Schedule(kind="daily"), "schedule.kind", "use now, at or cron"),  # type: ignore[arg-type]
    ],
)
def test_validate_schedule_refuses_naming_the_field(s: Schedule, field: str, says: str) -> None:
    error = refused(s)
    assert (error.field, says in error.reason) == (field, True), error.reason


def test_validate_at_in_the_past_is_refused_unless_allowed() -> None:
    past = Schedule(kind=AT, at=NOW - timedelta(minutes=1))
    error = refused(past)
    assert error.field == "schedule.at"
    assert "is in the past; pass allow_past" in error.reason
    assert validate_schedule(past, NOW, allow_past=True).at == NOW - timedelta(minutes=1)


def test_validate_at_normalizes_the_instant_to_utc() -> None:
    at = datetime(2026, 12, 1, 11, tzinfo=timezone(timedelta(hours=1)))
    v = validate_schedule(Schedule(kind=AT, at=at), NOW)
    assert v.at == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert v.at is not None and v.at.tzinfo is UTC


def test_validate_now_accepts_a_bare_schedule() -> None:
    assert validate_schedule(Schedule(kind=NOW_KIND), NOW) == Schedule(kind=NOW_KIND)


# -- first_fire and upcoming -----------------------------------------------------------------


def test_first_fire_of_cron_is_strictly_after_now() -> None:
    on_the_hour = NOW.replace(minute=0, second=0)
    assert first_fire(cron(), on_the_hour) == on_the_hour + timedelta(hours=1)


def test_first_fire_of_cron_waits_for_start_and_includes_it() -> None:
    start = datetime(2026, 7, 1, tzinfo=UTC)
    assert first_fire(cron(start=start), NOW) == start
    assert first_fire(cron(start=start + timedelta(minutes=1)), NOW) == start + timedelta(hours=1)


def test_first_fire_of_cron_is_none_past_its_end() -> None:
    assert first_fire(cron("0 0 1 1 *", end=datetime(2026, 12, 31, tzinfo=UTC)), NOW) is None


def test_first_fire_of_at_and_now() -> None:
    at = NOW + timedelta(days=1)
    assert first_fire(Schedule(kind=AT, at=at), NOW) == at
    assert first_fire(Schedule(kind=NOW_KIND), NOW) == NOW


def test_upcoming_cron_lists_fires_in_the_zone_and_stops_at_end() -> None:
    s = cron("30 2 * * *", "America/New_York", end=datetime(2027, 3, 16, 12, tzinfo=UTC))
    fires = upcoming(s, datetime(2027, 3, 12, tzinfo=UTC), 10)  # DST starts on the 14th
    local = [f.astimezone(ZoneInfo("America/New_York")).strftime("%d %H:%M") for f in fires]
    assert local == ["12 02:30", "13 02:30", "14 03:00", "15 02:30", "16 02:30"]


def test_upcoming_at_is_the_instant_while_it_is_ahead() -> None:
    s = Schedule(kind=AT, at=NOW)
    assert upcoming(s, NOW - timedelta(seconds=1), 3) == [NOW]
    assert upcoming(s, NOW, 3) == []
    assert upcoming(Schedule(kind=NOW_KIND), NOW, 3) == []


# -- plan_fires ------------------------------------------------------------------------------


def hours_ago(n: int) -> datetime:
    return NOW.replace(minute=0, second=0) - timedelta(hours=n)


def test_plan_with_catchup_runs_every_missed_fire_oldest_first() -> None:
    plan = plan_fires(job(cron(), hours_ago(2), catchup=True), NOW)
    assert plan.runs == [
        (hours_ago(2), RunTrigger.CATCHUP),
        (hours_ago(1), RunTrigger.CATCHUP),
        (hours_ago(0), RunTrigger.SCHEDULE),
    ]
    assert (plan.skipped, plan.dropped, plan.new_next) == ([], 0, hours_ago(-1))


def test_plan_with_catchup_in_batches_covers_every_fire_once() -> None:
    j = job(cron(), hours_ago(9), catchup=True)
    seen: list[tuple[datetime, RunTrigger]] = []
    while j.next_fire_at is not None and j.next_fire_at <= NOW:
        plan = plan_fires(j, NOW, max_runs=4)
        assert len(plan.runs) <= 4
        seen += plan.runs
        j = replace(j, next_fire_at=plan.new_next)
    assert [fire for fire, _ in seen] == [hours_ago(n) for n in range(9, -1, -1)]
    assert [t for _, t in seen] == [RunTrigger.CATCHUP] * 9 + [RunTrigger.SCHEDULE]
    assert j.next_fire_at == hours_ago(-1)


def test_plan_without_catchup_runs_the_newest_and_skips_the_rest() -> None:
    plan = plan_fires(job(cron(), hours_ago(3)), NOW)
    assert plan.runs == [(hours_ago(0), RunTrigger.SCHEDULE)]
    assert plan.skipped == [hours_ago(3), hours_ago(2), hours_ago(1)]
    assert (plan.dropped, plan.new_next) == (0, hours_ago(-1))


def test_plan_without_catchup_lists_the_newest_skips_and_counts_the_rest() -> None:
    plan = plan_fires(job(cron(), hours_ago(10)), NOW, max_skipped=4)
    assert plan.skipped == [hours_ago(n) for n in (4, 3, 2, 1)]
    assert plan.dropped == 6  # hours_ago(10) .. hours_ago(5)


def test_plan_for_an_every_minute_job_down_for_30_days_is_fast_and_exact() -> None:
    j = job(cron("* * * * *", "America/New_York"), NOW - timedelta(days=30))
    began = time.perf_counter()
    plan = plan_fires(j, NOW)
    elapsed = time.perf_counter() - began
    assert plan.runs == [(NOW.replace(second=0), RunTrigger.SCHEDULE)]
    assert len(plan.skipped) == 10_000
    assert plan.skipped[-1] == NOW.replace(second=0) - timedelta(minutes=1)
    assert len(plan.runs) + len(plan.skipped) + plan.dropped == 30 * 1440
    assert elapsed < 1.0, f"planning took {elapsed:.2f} s"


def test_plan_includes_a_next_fire_at_equal_to_now() -> None:
    due = hours_ago(0)
    plan = plan_fires(job(cron(), due), due)
    assert plan.runs == [(due, RunTrigger.SCHEDULE)]
    assert plan.new_next == due + timedelta(hours=1)


def test_plan_stops_at_the_schedule_end() -> None:
    s = cron(end=hours_ago(2) + timedelta(minutes=30))
    plan = plan_fires(job(s, hours_ago(4), catchup=True), NOW)
    assert [fire for fire, _ in plan.runs] == [hours_ago(4), hours_ago(3), hours_ago(2)]
    assert plan.runs[-1][1] is RunTrigger.SCHEDULE
    assert plan.new_next is None


def test_plan_ignores_fires_before_the_schedule_start() -> None:
    plan = plan_fires(job(cron(start=hours_ago(1)), hours_ago(5)), NOW)
    assert plan.runs == [(hours_ago(0), RunTrigger.SCHEDULE)]
    assert plan.skipped == [hours_ago(1)]


def test_plan_with_catchup_over_a_fall_back_night_runs_a_repeated_time_once() -> None:
    ny = ZoneInfo("America/New_York")
    s = cron("30 1 * * *", "America/New_York")
    first = datetime(2026, 10, 31, 1, 30, tzinfo=ny)
    plan = plan_fires(job(s, first, catchup=True), datetime(2026, 11, 3, 12, tzinfo=UTC))
    assert [f.astimezone(ny).strftime("%d %H:%M%z") for f, _ in plan.runs] == [
        "31 01:30-0400",
        "01 01:30-0400",
        "02 01:30-0500",
        "03 01:30-0500",
    ]


def test_plan_refuses_a_job_without_cron_bookkeeping() -> None:
    with pytest.raises(ValueError, match="not a cron job"):
        plan_fires(replace(job(cron(), NOW), next_fire_at=None), NOW)
    with pytest.raises(ValueError, match="not a cron job"):
        plan_fires(job(Schedule(kind=AT, at=NOW), NOW), NOW)


# -- plan_ahead ------------------------------------------------------------------------------


def test_plan_ahead_runs_every_fire_in_the_window_whatever_the_catchup_rule() -> None:
    every_5 = cron("*/5 * * * *")
    on_time = job(every_5, NOW.replace(second=0) + timedelta(minutes=5))
    plan = plan_ahead(on_time, NOW, NOW + timedelta(minutes=20))
    minutes = [(f.minute, t) for f, t in plan.runs]
    assert minutes == [(m, RunTrigger.SCHEDULE) for m in (5, 10, 15, 20)]
    assert (plan.skipped, plan.new_next) == ([], NOW.replace(second=0) + timedelta(minutes=25))


def test_plan_ahead_applies_the_catchup_rule_to_missed_fires_only() -> None:
    late = job(cron("*/5 * * * *"), NOW.replace(second=0) - timedelta(minutes=15))
    plan = plan_ahead(late, NOW, NOW + timedelta(minutes=10))
    assert [f.minute for f in plan.skipped] == [45, 50, 55]  # 11:45 .. 11:55 were missed
    assert [(f.minute, t) for f, t in plan.runs] == [
        (0, RunTrigger.SCHEDULE),  # the newest missed fire, 12:00
        (5, RunTrigger.SCHEDULE),  # not due yet: not missed
        (10, RunTrigger.SCHEDULE),
    ]


def test_plan_ahead_stops_at_max_runs_and_the_end_bound() -> None:
    j = job(cron("* * * * *"), NOW.replace(second=0) + timedelta(minutes=1))
    plan = plan_ahead(j, NOW, NOW + timedelta(hours=1), max_runs=3)
    assert len(plan.runs) == 3
    assert plan.new_next == NOW.replace(second=0) + timedelta(minutes=4)  # plan again
    ends = job(cron("* * * * *", end=NOW + timedelta(minutes=2)), j.next_fire_at or NOW)
    ended = plan_ahead(ends, NOW, NOW + timedelta(hours=1))
    assert (len(ended.runs), ended.new_next) == (2, None)


@settings(max_examples=60, deadline=None)
@given(
    expr=st.sampled_from(["* * * * *", "*/7 * * * *", "0 * * * *", "15 2 * * *", "30 1 * * *"]),
    tz=st.sampled_from(["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]),
    steps=st.lists(st.integers(1, 7200), min_size=1, max_size=40),
    windows=st.lists(st.integers(0, 900), min_size=1, max_size=5),
)
def test_plan_ahead_in_steps_covers_every_fire_exactly_once(
    expr: str, tz: str, steps: list[int], windows: list[int]
) -> None:
    start = datetime(2026, 10, 24, tzinfo=UTC)  # two DST changes within reach
    s = cron(expr, tz)
    j = job(s, first_fire(s, start) or start, catchup=True)
    planned: list[datetime] = []
    now = reach = start
    for i, step in enumerate(steps):
        now += timedelta(seconds=step)
        horizon = now + timedelta(seconds=windows[i % len(windows)])
        reach = max(reach, horizon)
        while j.next_fire_at is not None and j.next_fire_at <= horizon:
            plan = plan_ahead(j, now, horizon, max_runs=5)
            planned += [fire for fire, _ in plan.runs] + plan.skipped
            j = replace(j, next_fire_at=plan.new_next)
    expected = upcoming(s, start, len(planned) + 1)
    assert planned == expected[: len(planned)]
    assert j.next_fire_at == expected[len(planned)]
    assert all(fire <= reach for fire in planned)  # nothing beyond the furthest window
