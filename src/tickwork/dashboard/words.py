"""Plain-language text for schedules, durations and ages (pure; no clock reads)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tickwork.core.model import Schedule, ScheduleKind

_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_DAY_NAMES = {d[:3].upper(): str(i) for i, d in enumerate(_DAYS)}
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]  # fmt: skip


def schedule_words(schedule: Schedule) -> str:
    """ "at 09:00 on weekdays, Europe/Berlin"; the cron text itself when no phrase fits."""
    if schedule.kind is ScheduleKind.NOW:
        return "once, on creation"
    if schedule.kind is ScheduleKind.AT:
        assert schedule.at is not None
        return f"once, at {schedule.at:%Y-%m-%d %H:%M} UTC"
    return f"{cron_words(schedule.cron or '')}, {schedule.timezone}"


def cron_words(expr: str) -> str:
    fields = expr.split()
    if len(fields) != 5:
        return f"cron {expr}"
    minute, hour, dom, month, dow = fields
    when = _time_words(minute, hour)
    if when is None:
        return f"cron {expr}"
    days = _day_words(dom, month, dow)
    if days is None:
        return f"cron {expr}"
    return f"{when}{days}"


def _time_words(minute: str, hour: str) -> str | None:
    if minute == "*" and hour == "*":
        return "every minute"
    if minute.startswith("*/") and hour == "*" and minute[2:].isdigit():
        return f"every {minute[2:]} minutes"
    if minute.isdigit() and hour == "*":
        return f"every hour at minute {int(minute)}"
    if minute.isdigit() and hour.startswith("*/") and hour[2:].isdigit():
        return f"every {hour[2:]} hours at minute {int(minute)}"
    if minute.isdigit() and all(h.isdigit() for h in hour.split(",")):
        times = [f"{int(h):02d}:{int(minute):02d}" for h in hour.split(",")]
        return "at " + ", ".join(times)
    return None


def _day_words(dom: str, month: str, dow: str) -> str | None:
    if month != "*" and not month.isdigit():
        return None
    in_month = f" in {_MONTHS[int(month) - 1]}" if month.isdigit() and 1 <= int(month) <= 12 else ""
    if dom == "*" and dow == "*":
        return in_month if in_month else ""
    if dom == "*":
        spelled = _dow_words(dow)
        return None if spelled is None else f" on {spelled}{in_month}"
    if dow == "*" and dom.isdigit():
        return f" on day {int(dom)} of the month{in_month}"
    return None


def _dow_words(dow: str) -> str | None:
    normal = dow.upper()
    for name, number in _DAY_NAMES.items():
        normal = normal.replace(name, number)
    if normal in ("1-5",):
        return "weekdays"
    if normal in ("0,6", "6,0", "6-7", "6,7"):
        return "weekends"
    names = []
    for part in normal.split(","):
        if not part.isdigit() or int(part) > 7:
            return None
        names.append(_DAYS[int(part) % 7])
    return ", ".join(names)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "\u2013"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def dst_change(fire: datetime, zone: str) -> bool:
    """Whether the zone's UTC offset on ``fire``'s local day differs from the day before:
    the fire falls on a daylight-saving night."""
    try:
        tz = ZoneInfo(zone)
    except (KeyError, ValueError):
        return False
    return fire.astimezone(tz).utcoffset() != (fire - timedelta(days=1)).astimezone(tz).utcoffset()
