"""Backfill planning in the pure core: by example, and by property (a backfill decides every
date of its range exactly once, in its order, whatever the runs finish like)."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.core.backfill import (
    Action,
    Backfill,
    BackfillMode,
    BackfillSpec,
    BackfillState,
    Existing,
    Reprocess,
    all_dates,
    capacity,
    count_dates,
    decide,
    eta_seconds,
    next_dates,
    plan_step,
    validate_spec,
)
from tickwork.core.errors import ValidationError
from tickwork.core.model import Job, RunState, Schedule, ScheduleKind, Task, TaskKind

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CRONS = ("0 2 * * *", "30 1 * * *", "*/30 * * * *", "0 * * * *", "15 3 * * MON-FRI", "0 0 1 * *")
ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC", "Asia/Kolkata")


def job(cron: str = "0 2 * * *", tz: str = "Europe/Berlin", **kw: object) -> Job:
    return Job(
        id="j1",
        name="daily",
        schedule=Schedule(kind=ScheduleKind.CRON, cron=cron, timezone=tz),
        tasks=(Task(name="main", kind=TaskKind.SHELL, config={"argv": ["true"]}),),
        created_at=T0,
        updated_at=T0,
        **kw,  # type: ignore[arg-type]
    )


def backfill(start: datetime, end: datetime, **kw: object) -> Backfill:
    base: dict[str, object] = {
        "id": "b1",
        "job_id": "j1",
        "job_name": "daily",
        "start": start,
        "end": end,
        "mode": BackfillMode.PARALLEL,
        "max_active": 4,
        "chunk_size": 3,
        "reprocess": Reprocess.NONE,
        "reverse": False,
        "priority": -10,
        "state": BackfillState.RUNNING,
        "total": 0,
        "created_at": T0,
        "updated_at": T0,
    }
    return Backfill(**{**base, **kw})  # type: ignore[arg-type]


def test_dates_across_the_spring_gap_are_the_schedules() -> None:
    # 02:30 Berlin does not exist on 29 March 2026: the gap rule fires at 03:00 (01:00 UTC).
    j = job("30 2 * * *")
    dates = all_dates(
        j, datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 30, 23, tzinfo=UTC), 10
    )
    assert dates == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]


def test_the_fall_back_hour_is_one_date_for_wall_time_and_two_for_elapsed_time() -> None:
    start, end = datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 2, tzinfo=UTC)
    assert len(all_dates(job("30 2 * * *"), start, end, 10)) == 1  # 02:30 once
    assert count_dates(job("0 * * * *"), start, end) == 5  # both 02:00s


def test_a_range_over_a_million_dates_is_refused_without_walking_it_all() -> None:
    # Every minute for 99 years: 52 million dates. Counting stops past the limit (days, not
    # decades of days), so the refusal is quick enough for an API answer.
    start, end = datetime(1901, 1, 1, tzinfo=UTC), datetime(2000, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError) as e:
        count_dates(job("* * * * *"), start, end)
    assert e.value.field == "to" and "at most 1000000 per backfill" in str(e.value)
    assert count_dates(job("0 2 * * *", "UTC"), start, end) == 36_159  # daily: under the limit


def test_decide_by_reprocess_rule() -> None:
    ok, bad = Existing("r", RunState.SUCCESS), Existing("r", RunState.FAILED)
    running, skipped = Existing("r", RunState.RUNNING), Existing("r", RunState.SKIPPED)
    table = {
        (Reprocess.NONE, None): Action.CREATE,
        (Reprocess.NONE, ok): Action.SKIP,
        (Reprocess.NONE, bad): Action.SKIP,
        (Reprocess.NONE, skipped): Action.RERUN,
        (Reprocess.FAILED, ok): Action.SKIP,
        (Reprocess.FAILED, bad): Action.RERUN,
        (Reprocess.ALL, ok): Action.RERUN,
        (Reprocess.ALL, running): Action.TRACK,
    }
    for (rule, existing), action in table.items():
        assert decide(rule, existing) is action, (rule, existing)


def test_capacity_by_mode() -> None:
    b = backfill(T0, T0)
    assert capacity(b, 1) == 3 and capacity(b, 1, slot_cap=2) == 1 and capacity(b, 9) == 0
    assert capacity(b, 0, slot_cap=0) == 1  # a share never stops a backfill outright
    seq = backfill(T0, T0, mode=BackfillMode.SEQUENTIAL)
    assert (capacity(seq, 0), capacity(seq, 1)) == (1, 0)
    chunked = backfill(T0, T0, mode=BackfillMode.CHUNKED)
    assert (capacity(chunked, 0), capacity(chunked, 1)) == (3, 0)
    assert capacity(backfill(T0, T0, state=BackfillState.PAUSED), 0) == 0


def test_validate_spec_names_the_field() -> None:
    j = job(depends_on_past=True)
    early = datetime(1, 1, 1, tzinfo=UTC)
    assert_refused(j, BackfillSpec("daily", T0 + timedelta(days=1), T0), "to")
    assert_refused(j, BackfillSpec("daily", early, T0), "from")
    cases = {
        "max_active": BackfillSpec("daily", T0, T0, max_active=0),
        "reverse": BackfillSpec("daily", T0, T0, reverse=True),
        "mode": BackfillSpec("daily", T0, T0, mode="fast"),  # type: ignore[arg-type]
        "from": BackfillSpec("daily", T0.replace(tzinfo=None), T0),
        "to": BackfillSpec("daily", T0, T0 + timedelta(days=40_000)),
    }
    for field, spec in cases.items():
        assert_refused(j, spec, field)


def assert_refused(j: Job, spec: BackfillSpec, field: str) -> None:
    with pytest.raises(ValidationError) as e:
        validate_spec(spec, j)
    assert e.value.field == field


def test_eta_from_run_durations() -> None:
    b = backfill(T0, T0, max_active=2)
    assert eta_seconds(b, 3, [10.0, 20.0], running=1) == 30.0  # 4 runs, 2 waves of 15 s
    assert eta_seconds(b, 3, []) is None and eta_seconds(b, 0, []) == 0.0


def _simulate(
    b: Backfill, j: Job, existing: dict[datetime, Existing], seed: int, lookahead: int
) -> list[datetime]:
    """Run steps until exhausted; runs finish at random. Returns the dates decided."""
    rng, active, decided = random.Random(seed), 0, []
    for _ in range(10_000):
        if b.exhausted:
            break
        active -= rng.randint(0, active)
        room = capacity(b, active)
        if room == 0:
            continue
        step = plan_step(b, next_dates(j, b, lookahead), existing, room, lookahead=lookahead)
        decided += [d.logical_date for d in step.decisions]
        active += sum(d.action is not Action.SKIP for d in step.decisions)
        b = dataclasses.replace(b, cursor=step.cursor, exhausted=step.exhausted)
    return decided


@settings(max_examples=60, deadline=None)
@given(
    cron=st.sampled_from(CRONS),
    tz=st.sampled_from(ZONES),
    start_day=st.integers(0, 360),
    days=st.integers(0, 20),
    mode=st.sampled_from(list(BackfillMode)),
    reverse=st.booleans(),
    max_active=st.integers(1, 6),
    lookahead=st.integers(1, 50),
    done=st.sets(st.integers(0, 2000), max_size=200),
    seed=st.integers(0, 1000),
)
def test_a_backfill_decides_every_date_once_in_order(  # noqa: PLR0917
    cron: str,
    tz: str,
    start_day: int,
    days: int,
    mode: BackfillMode,
    reverse: bool,
    max_active: int,
    lookahead: int,
    done: set[int],
    seed: int,
) -> None:
    j = job(cron, tz)
    start = T0 + timedelta(days=start_day, hours=seed % 24)
    end = start + timedelta(days=days, hours=seed % 7)
    expected = all_dates(j, start, end, 100_000)
    assert len(expected) == count_dates(j, start, end)
    existing = {d: Existing("r", RunState.SUCCESS) for i, d in enumerate(expected) if i in done}
    b = backfill(
        start, end, mode=mode, reverse=reverse, max_active=max_active, chunk_size=max_active
    )
    decided = _simulate(b, j, existing, seed, lookahead)
    assert decided == (expected[::-1] if reverse else expected)
