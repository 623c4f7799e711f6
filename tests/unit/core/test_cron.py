"""Example tests for the cron adapter: grammar, zones, and the named DST cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from tickwork.core import cron
from tickwork.core.errors import ValidationError

NY = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
SANTIAGO = ZoneInfo("America/Santiago")


def local(tz: ZoneInfo, *fields: int, fold: int = 0) -> datetime:
    year, month, day, hour, minute = fields
    return datetime(year, month, day, hour, minute, tzinfo=tz, fold=fold)


def walls(fires: list[datetime], tz: ZoneInfo) -> list[str]:
    return [f.astimezone(tz).strftime("%m-%d %H:%M%z") for f in fires]


def upcoming(text: str, tz: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    return cron.fires(cron.parse(text), tz, after, after + timedelta(days=400), count)


# -- grammar ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "normalized"),
    [
        ("30 2 * * *", "30 2 * * *"),
        ("  0   9 * *   mon-fri ", "0 9 * * MON-FRI"),
        ("@daily", "0 0 * * *"),
        ("@MIDNIGHT", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("0 0 L * *", "0 0 L * *"),
        ("0 9 * * mon#2", "0 9 * * MON#2"),
        ("0 9 * * 5l", "0 9 * * 5L"),
        ("*/15 0-6,22/1 1,15 jan-mar,dec 0-7", "*/15 0-6,22/1 1,15 JAN-MAR,DEC 0-7"),
    ],
)
def test_parse_normalizes_case_spacing_and_aliases(given: str, normalized: str) -> None:
    assert cron.parse(given) == cron.CronExpr(normalized)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("", "expected 5 fields"),
        ("* * * *", "got 4 field(s)"),
        ("*/20 * * * * *", "got 6 field(s)"),
        ("@reboot", "got 1 field(s)"),
        ("60 * * * *", "minute value 60 is out of range; use 0-59"),
        ("0 24 * * *", "hour value 24 is out of range; use 0-23"),
        ("0 0 0 * *", "day-of-month value 0 is out of range; use 1-31"),
        ("0 0 * 13 *", "month value 13 is out of range"),
        ("0 0 * * 8", "day-of-week value 8 is out of range"),
        ("0 0 * FOO *", "month value 'FOO' is not a number; use 1-12 or JAN-DEC"),
        ("10-5 * * * *", "runs backwards"),
        ("*/0 * * * *", "step in '*/0' must be a whole number of 1 or more"),
        ("*/ * * * *", "must be a whole number"),
        ("1,,2 * * * *", "empty minute term"),
        ("0 0 ? * MON", "not a number"),
        ("0 0 15W * *", "not a number"),
        ("H 3 * * *", "not a number"),
        ("0 0 * * MON#6", "the week after '#' must be 1-5"),
        ("0 0 L/2 * *", "not a number"),
        ("0 0 * L *", "not a number"),
        ("0 0 * * L", "not a number"),
        ("0 ٣ * * *", "not a number"),  # an Arabic-Indic digit is not a cron digit
    ],
)
def test_parse_refuses_bad_expressions_naming_what_is_accepted(given: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        cron.parse(given)
    assert caught.value.field == "schedule.cron"
    assert says in caught.value.reason


def test_parse_reads_an_equal_range_as_one_value_unlike_croniter() -> None:
    # croniter expands "5-5" to every minute; cron (and we) read it as minute 5.
    after = datetime(2026, 1, 1, tzinfo=UTC)
    assert walls(upcoming("5-5 * * * *", ZoneInfo("UTC"), after, 2), ZoneInfo("UTC")) == [
        "01-01 00:05+0000",
        "01-01 01:05+0000",
    ]


def test_parse_steps_from_a_start_value_to_the_end_of_the_field() -> None:
    after = datetime(2026, 1, 1, tzinfo=UTC)
    fires = upcoming("50/5 0 * * *", ZoneInfo("UTC"), after, 3)
    assert [f.minute for f in fires] == [50, 55, 50]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Day-of-month OR day-of-week when neither starts with "*" (the 1st, or Mondays).
        ("0 0 1 * MON", ["01-01", "01-05", "01-12", "01-19", "01-26", "02-01"]),
        # AND when one starts with "*": odd days that are Mondays.
        ("0 0 */2 * MON", ["01-05", "01-19", "02-09", "02-23", "03-09", "03-23"]),
        ("0 0 L * *", ["01-31", "02-28", "03-31", "04-30", "05-31", "06-30"]),
        ("0 0 * * MON#2", ["01-12", "02-09", "03-09", "04-13", "05-11", "06-08"]),
        ("0 0 * * 5L", ["01-30", "02-27", "03-27", "04-24", "05-29", "06-26"]),
        # Plain weekdays and nth weekdays mixed (croniter alone refuses this).
        ("0 0 * * SUN,MON#1", ["01-04", "01-05", "01-11", "01-18", "01-25", "02-01"]),
        ("0 0 15 * MON#2", ["01-12", "01-15", "02-09", "02-15", "03-09", "03-15"]),
        ("0 0 * * 7", ["01-04", "01-11", "01-18", "01-25", "02-01", "02-08"]),
    ],
)
def test_day_fields_select_days_like_debian_cron(text: str, expected: list[str]) -> None:
    after = datetime(2025, 12, 31, 12, tzinfo=UTC)
    fires = upcoming(text, ZoneInfo("UTC"), after, len(expected))
    assert [f.strftime("%m-%d") for f in fires] == expected


def test_leap_day_fires_only_in_leap_years() -> None:
    after, until = datetime(2026, 1, 1, tzinfo=UTC), datetime(2105, 1, 1, tzinfo=UTC)
    fires = cron.fires(cron.parse("0 0 29 2 *"), ZoneInfo("UTC"), after, until, 100)
    assert [f.year for f in fires][-3:] == [2092, 2096, 2104]  # 2100 is no leap year
    assert all((f.month, f.day) == (2, 29) for f in fires)


def test_next_fire_is_none_for_a_date_that_never_exists() -> None:
    after = datetime(2026, 1, 1, tzinfo=UTC)
    assert cron.next_fire(cron.parse("0 0 30 2 *"), ZoneInfo("UTC"), after) is None
    assert cron.next_fire(cron.parse("0 0 1,21 * MON#5"), ZoneInfo("UTC"), after) is not None
    assert cron.next_fire(cron.parse("0 0 */20 * MON#5"), ZoneInfo("UTC"), after) is None


def test_next_fire_is_strictly_after_and_in_utc() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    at_fire = local(berlin, 2026, 6, 1, 9, 0)
    fire = cron.next_fire(cron.parse("0 9 * * *"), berlin, at_fire)
    assert fire == datetime(2026, 6, 2, 7, 0, tzinfo=UTC)
    assert fire is not None and fire.tzinfo is UTC


def test_next_fire_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="aware"):
        cron.next_fire(cron.parse("* * * * *"), NY, datetime(2026, 1, 1))


# -- zones -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Europe/Berlin", "UTC", "Australia/Lord_Howe", "Etc/GMT+5"])
def test_zone_accepts_iana_names(name: str) -> None:
    assert cron.zone(name).key == name


@pytest.mark.parametrize(
    "name", ["Mars/Olympus", "america/new_york", "", "localtime", "America", "../etc/passwd"]
)
def test_zone_refuses_what_is_not_an_iana_name(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        cron.zone(name)
    assert caught.value.field == "schedule.timezone"
    assert "use a name such as" in caught.value.reason


# -- daylight saving -------------------------------------------------------------------------


def test_new_york_spring_forward_fires_a_skipped_wall_time_once_at_three() -> None:
    fires = upcoming("30 2 * * *", NY, local(NY, 2026, 3, 7, 12, 0), 3)
    assert walls(fires, NY) == ["03-08 03:00-0400", "03-09 02:30-0400", "03-10 02:30-0400"]


def test_spring_forward_gap_holding_several_wall_times_fires_once() -> None:
    fires = upcoming("0,15,30,45 2 * * *", NY, local(NY, 2026, 3, 7, 12, 0), 5)
    assert walls(fires, NY) == [
        "03-08 03:00-0400",
        "03-09 02:00-0400",
        "03-09 02:15-0400",
        "03-09 02:30-0400",
        "03-09 02:45-0400",
    ]


def test_new_york_fall_back_fires_a_repeated_wall_time_once() -> None:
    fires = upcoming("30 1 * * *", NY, local(NY, 2026, 10, 31, 12, 0), 3)
    assert walls(fires, NY) == ["11-01 01:30-0400", "11-02 01:30-0500", "11-03 01:30-0500"]


def test_fall_back_start_inside_the_repeat_does_not_fire_the_repeat() -> None:
    second_pass = local(NY, 2026, 11, 1, 1, 10, fold=1)
    fire = cron.next_fire(cron.parse("30 1 * * *"), NY, second_pass)
    assert fire is not None and walls([fire], NY) == ["11-02 01:30-0500"]


def test_hourly_on_fall_back_night_fires_at_both_one_oclocks() -> None:
    fires = upcoming("0 * * * *", NY, local(NY, 2026, 11, 1, 0, 30), 3)
    assert walls(fires, NY) == ["11-01 01:00-0400", "11-01 01:00-0500", "11-01 02:00-0500"]
    assert fires[1] - fires[0] == timedelta(hours=1)


def test_every_fifteen_minutes_follows_real_time_across_both_changes() -> None:
    for start in (local(NY, 2026, 3, 8, 1, 0), local(NY, 2026, 11, 1, 0, 30)):
        fires = upcoming("*/15 * * * *", NY, start, 12)
        gaps = {b - a for a, b in pairwise(fires)}
        assert gaps == {timedelta(minutes=15)}


def test_hourly_skips_the_hour_that_does_not_exist() -> None:
    fires = upcoming("0 * * * *", NY, local(NY, 2026, 3, 8, 0, 30), 3)
    assert walls(fires, NY) == ["03-08 01:00-0500", "03-08 03:00-0400", "03-08 04:00-0400"]


def test_lord_howe_half_hour_spring_forward_moves_a_skipped_time_to_half_past_two() -> None:
    # 2026-10-04 02:00 +10:30 becomes 02:30 +11:00.
    fires = upcoming("15 2 * * *", LORD_HOWE, local(LORD_HOWE, 2026, 10, 3, 12, 0), 2)
    assert walls(fires, LORD_HOWE) == ["10-04 02:30+1100", "10-05 02:15+1100"]


def test_lord_howe_half_hour_fall_back_fires_a_repeated_time_once() -> None:
    # 2026-04-05 02:00 +11:00 becomes 01:30 +10:30: 01:30-01:59 happen twice.
    fires = upcoming("45 1 * * *", LORD_HOWE, local(LORD_HOWE, 2026, 4, 4, 12, 0), 2)
    assert walls(fires, LORD_HOWE) == ["04-05 01:45+1100", "04-06 01:45+1030"]


def test_lord_howe_every_thirty_minutes_counts_the_repeated_half_hour_twice() -> None:
    fires = upcoming("*/30 * * * *", LORD_HOWE, local(LORD_HOWE, 2026, 4, 5, 1, 0), 4)
    assert walls(fires, LORD_HOWE) == [
        "04-05 01:30+1100",
        "04-05 01:30+1030",
        "04-05 02:00+1030",
        "04-05 02:30+1030",
    ]


def test_santiago_midnight_that_does_not_exist_fires_at_one() -> None:
    # 2026-09-06: clocks go from 00:00 -04 straight to 01:00 -03.
    fires = upcoming("0 0 * * *", SANTIAGO, local(SANTIAGO, 2026, 9, 5, 12, 0), 2)
    assert walls(fires, SANTIAGO) == ["09-06 01:00-0300", "09-07 00:00-0300"]


def test_fires_bulk_helpers_agree_over_a_fall_back_night() -> None:
    expr, after = cron.parse("*/10 * * * *"), local(NY, 2026, 10, 31, 22, 0)
    until = after.astimezone(UTC) + timedelta(hours=8)  # real hours, not wall hours
    listed = cron.fires(expr, NY, after, until, 1000)
    assert len(listed) == 8 * 6  # eight real hours, one of them a repeated wall hour
    assert walls(listed, NY).count("11-01 01:10-0400") == 1
    assert walls(listed, NY).count("11-01 01:10-0500") == 1
    assert cron.count_fires(expr, NY, after, until) == len(listed)
    assert cron.latest_fires(expr, NY, after, until, 5) == listed[-5:]
    assert cron.latest_fires(expr, NY, after, until, 10_000) == listed


def test_fires_respects_limit_and_bounds() -> None:
    expr, after = cron.parse("0 * * * *"), datetime(2026, 1, 1, tzinfo=UTC)
    assert len(cron.fires(expr, NY, after, after + timedelta(days=1), 5)) == 5
    assert cron.fires(expr, NY, after, after + timedelta(minutes=59), 5) == []
    assert cron.fires(expr, NY, after, after + timedelta(hours=1), 0) == []
    assert cron.fires(expr, NY, after, after + timedelta(hours=1), 5) == [
        after + timedelta(hours=1)
    ]


def test_count_fires_over_years_of_every_minute_is_exact_and_fast() -> None:
    expr = cron.parse("* * * * *")
    after, until = datetime(2016, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)
    days = (until - after).days
    assert cron.count_fires(expr, NY, after, until) == days * 1440


def test_describe_reads_time_and_day_fields() -> None:
    assert cron.describe(cron.parse("30 2 * * *")) == "at 02:30 every day"
    assert cron.describe(cron.parse("*/5 9-17 * * MON-FRI")) == (
        "at minute */5 of hour 9-17 on day-of-week MON-FRI"
    )
