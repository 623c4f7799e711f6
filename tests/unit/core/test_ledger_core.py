"""The schedule ledger in the pure core: classification, DST rules, and a month of normal
runs that shows only ``ran`` (property)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.core.errors import ValidationError
from tickwork.core.ledger import RunMark, TickStatus, ledger, missed, promised
from tickwork.core.model import Job, RunState, RunTrigger, Schedule, ScheduleKind, Task, TaskKind

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(cron: str = "0 2 * * *", tz: str = "Europe/Berlin", **kw: object) -> Job:
    schedule = Schedule(kind=ScheduleKind.CRON, cron=cron, timezone=tz)
    base = Job(
        id="j",
        name="j",
        schedule=schedule,
        tasks=(Task(name="main", kind=TaskKind.SHELL, config={"argv": ["true"]}),),
        created_at=T0,
        updated_at=T0,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def mark(t: datetime, trigger: RunTrigger = RunTrigger.SCHEDULE, **kw: object) -> RunMark:
    base = RunMark(f"r{t:%d%H}", t, RunState.SUCCESS, trigger, started_at=t)
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def utc_at(year: int, month: int, day: int, hour: int) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


def day(n: int, hour: int = 1) -> datetime:
    return datetime(2026, 3, n, hour, tzinfo=UTC)  # 02:00 Berlin in March (before the 29th)


def test_each_status() -> None:
    start = datetime(2026, 3, 5, tzinfo=UTC)
    bounded = Schedule(ScheduleKind.CRON, cron="0 2 * * *", timezone="Europe/Berlin")
    j = job(schedule=dataclasses.replace(bounded, start=start, end=day(9, 2)))
    ticks = promised(j, day(1, 0), day(12, 0))
    runs = {
        day(5): mark(day(5)),
        day(6): mark(day(6), RunTrigger.MISSED, state=RunState.SKIPPED, started_at=None),
        day(7): mark(day(7), RunTrigger.BACKFILL),
    }
    now = day(9, 1) + timedelta(minutes=2)
    got = [(t.logical_date.day, t.status) for t in ledger(j, ticks, runs, now)]
    assert got == [
        (1, TickStatus.BEFORE_START), (2, TickStatus.BEFORE_START), (3, TickStatus.BEFORE_START),
        (4, TickStatus.BEFORE_START), (5, TickStatus.RAN), (6, TickStatus.SKIPPED),
        (7, TickStatus.BACKFILLED), (8, TickStatus.MISSED), (9, TickStatus.DUE),
        (10, TickStatus.AFTER_END), (11, TickStatus.AFTER_END),
    ]  # fmt: skip
    assert [t.logical_date.day for t in missed(ledger(j, ticks, runs, now))] == [8]


def test_paused_ticks_and_ticks_before_the_job_existed() -> None:
    j = job(created_at=day(2, 12), paused=True, updated_at=day(4, 12))
    ticks = ledger(j, promised(j, day(1, 0), day(6, 0)), {day(3): mark(day(3))}, day(6))
    assert [t.status for t in ticks] == [
        TickStatus.BEFORE_START, TickStatus.BEFORE_START, TickStatus.RAN, TickStatus.MISSED,
        TickStatus.PAUSED,
    ]  # fmt: skip


def test_dst_rules_are_named() -> None:
    wall = job("30 2 * * *")
    spring = promised(wall, utc_at(2026, 3, 29, 0), utc_at(2026, 3, 29, 5))
    [gap] = ledger(wall, spring, {}, T0)
    assert (gap.logical_date, gap.dst) == (utc_at(2026, 3, 29, 1), "gap")
    [fold] = ledger(wall, promised(wall, utc_at(2026, 10, 25, 0), utc_at(2026, 10, 25, 4)), {}, T0)
    assert fold.dst == "fold"
    hourly = job("0 * * * *")
    night = promised(hourly, utc_at(2026, 10, 24, 23), utc_at(2026, 10, 25, 2))
    assert [t.dst for t in ledger(hourly, night, {}, T0)] == [
        None,
        "fold_twice",
        "fold_twice",
        None,
    ]


def test_bad_ranges_name_the_field() -> None:
    with pytest.raises(ValidationError) as e:
        promised(job("* * * * *"), T0, T0 + timedelta(days=30))
    assert e.value.field == "to"
    with pytest.raises(ValidationError) as e:
        promised(job(schedule=Schedule(kind=ScheduleKind.NOW)), T0, T0)
    assert e.value.field == "job"


@settings(max_examples=40, deadline=None)
@given(
    cron=st.sampled_from(
        ["0 2 * * *", "30 1 * * *", "0 */6 * * *", "15 3 * * MON-FRI", "0 * * * *"]
    ),
    tz=st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"]),
    month=st.integers(1, 12),
)
def test_a_month_of_normal_runs_shows_only_ran(cron: str, tz: str, month: int) -> None:
    j = job(cron, tz)
    start = datetime(2026, month, 1, tzinfo=UTC)
    end = start + timedelta(days=31)
    ticks = promised(j, start, end)
    runs = {t: mark(t) for t in ticks}  # the scheduler made each fire's run
    now = end + timedelta(hours=1)
    assert {t.status for t in ledger(j, ticks, runs, now)} == {TickStatus.RAN}
