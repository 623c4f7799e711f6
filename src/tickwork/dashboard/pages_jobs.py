"""Jobs, one job, a workflow's grid, and the calendar of upcoming fires."""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from functools import lru_cache

import yaml
from starlette.responses import Response

from tickwork.api.schemas import JobRead
from tickwork.core.alerts import DEFAULT_START_DEADLINE
from tickwork.core.errors import ValidationError
from tickwork.core.layout import layout
from tickwork.core.model import Job, RunState, Schedule
from tickwork.core.schedule import upcoming
from tickwork.dashboard.context import Ctx
from tickwork.dashboard.svg import dag_of_job
from tickwork.dashboard.words import dst_change
from tickwork.ports import JobFilter
from tickwork.ports.web import CronJob, ScheduleGroup

JOBS_PER_PAGE = 50
STRIP_RUNS = 20
GRID_RUNS = 25
GRID_MAX_RUNS = 100
CALENDAR_DAYS = 7
CALENDAR_ROWS = 200
#: Fires of one schedule counted per hour of the forecast (every minute is 60 an hour).
FIRES_PER_SCHEDULE = CALENDAR_DAYS * 24 * 60


async def jobs(ctx: Ctx) -> Response:
    state, last = ctx.query("state"), ctx.query("last")
    if state not in (None, "paused", "active"):
        raise ValidationError("state", "must be paused or active")
    if last not in (None, *RunState):
        raise ValidationError("last", f"must be one of {', '.join(RunState)}")
    filters = {n: ctx.query(n) or "" for n in ("q", "tag", "state", "kind", "queue", "last")}
    where = JobFilter(
        name_prefix=ctx.query("q"),
        tag=ctx.query("tag"),
        paused=None if state is None else state == "paused",
        schedule_kind=ctx.query("kind"),
        queue=ctx.query("queue"),
        last_state=last,
    )
    page = await ctx.services.list_jobs(limit=JOBS_PER_PAGE, after=ctx.query("after"), where=where)
    strips = await ctx.store.recent_run_states([j.id for j in page.jobs], STRIP_RUNS)
    return await ctx.page(
        "jobs.html",
        title="Jobs",
        nav="jobs",
        jobs=page.jobs,
        next_after=page.next_after,
        strips={k: list(reversed(v)) for k, v in strips.items()},
        filters=filters,
        kept={k: v for k, v in filters.items() if v},
        run_states=[s.value for s in RunState],
    )


def definition_yaml(job: Job) -> str:
    """The job as the API shows it (so whatever the API masks stays masked), in YAML."""
    data = JobRead.model_validate(job).model_dump(mode="json", exclude_none=True)
    for bookkeeping in ("id", "created_at", "updated_at", "next_fire_at", "last_fire_at"):
        data.pop(bookkeeping, None)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


async def job(ctx: Ctx) -> Response:
    name = ctx.request.path_params["name"]
    up = await ctx.services.upcoming_due(name, 10)
    found = up.job
    history = await ctx.services.list_runs(job=name, limit=20)
    return await ctx.page(
        "job.html",
        title=f"Job {name}",
        nav="jobs",
        job=found,
        definition=definition_yaml(found),
        fires=[
            (f, dst_change(f, found.schedule.timezone), d if d != f else None)
            for f, d in zip(up.fires, up.dues, strict=True)
        ],
        history=history.runs,
        graph=dag_of_job(found) if len(found.tasks) > 1 else None,
        alerts=await ctx.store.recent_alerts(ctx.now - timedelta(days=1), job_name=name, limit=10),
        default_deadline=DEFAULT_START_DEADLINE,
    )


async def grid(ctx: Ctx) -> Response:
    name = ctx.request.path_params["name"]
    found = await ctx.services.get_job(name)
    count = _int(ctx.query("runs"), GRID_RUNS, GRID_MAX_RUNS, "runs")
    columns = await ctx.store.grid(found.id, count)
    tasks = _topological(found)
    seen = {t for c in columns for t in c.cells}
    tasks += sorted(seen - set(tasks))  # tasks of older definitions
    return await ctx.page(
        "grid.html", title=f"Grid of {name}", nav="jobs", job=found, columns=columns,
        tasks=tasks, count=count,
    )  # fmt: skip


def _topological(job: Job) -> list[str]:
    names = [t.name for t in job.tasks]
    placed = layout(names, {t.name: t.upstream for t in job.tasks}).nodes
    return sorted(names, key=lambda n: (placed[n].layer, placed[n].y))


def _int(raw: str | None, default: int, maximum: int, name: str) -> int:
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise ValidationError(name, f"must be a whole number from 1 to {maximum}")
    return int(raw)


async def calendar(ctx: Ctx) -> Response:
    # From midnight UTC, so that the heat map's rows are days and its columns hours.
    hour0 = ctx.now.replace(hour=0, minute=0, second=0, microsecond=0)
    end = hour0 + timedelta(days=CALENDAR_DAYS)
    # Jobs grouped by schedule in the database: 2,000 jobs usually share a few dozen
    # schedules, and the fires of each schedule are computed once (and cached for the hour).
    groups = await ctx.store.cron_schedules_firing_before(end)
    load: Counter[datetime] = Counter()
    total = 0
    for group in groups:
        per_hour, _ = _fires(group.schedule, hour0)
        for hour, n in per_hour.items():
            load[hour] += n * group.active
        total += sum(n for hour, n in per_hour.items() if hour > ctx.now) * group.jobs
    peak = max(load.values(), default=0)
    hours = [hour0 + timedelta(hours=h) for h in range(CALENDAR_DAYS * 24)]
    shown = await _soonest(ctx, groups, hour0, end)
    return await ctx.page(
        "calendar.html", title="Calendar", nav="calendar", rows=shown,
        more=max(0, total - len(shown)), hours=hours, load=load, peak=peak,
        days=[hour0 + timedelta(days=d) for d in range(CALENDAR_DAYS)],
    )  # fmt: skip


async def _soonest(
    ctx: Ctx, groups: list[ScheduleGroup], hour0: datetime, end: datetime
) -> list[tuple[datetime, CronJob, bool]]:
    """The first CALENDAR_ROWS fires over all jobs: the schedules' fire lists merged lazily,
    each fire standing for every job of its schedule; the names of only the jobs on the
    schedules those rows need are read (one query)."""
    merged = heapq.merge(
        *(((f, i) for f in _fires(g.schedule, hour0)[1]) for i, g in enumerate(groups))
    )
    fires: list[tuple[datetime, int]] = []
    count = 0
    for fire, index in merged:
        if fire <= ctx.now:
            continue  # today's earlier hours count in the load, not as upcoming
        fires.append((fire, index))
        count += groups[index].jobs
        if count >= CALENDAR_ROWS:
            break
    needed = sorted({i for _, i in fires})
    named = await ctx.store.cron_jobs_of([groups[i].schedule for i in needed], end)
    by_schedule: dict[Schedule, list[CronJob]] = defaultdict(list)
    for job in named:
        by_schedule[job.schedule].append(job)
    rows: list[tuple[datetime, CronJob, bool]] = []
    for fire, index in fires:
        schedule = groups[index].schedule
        dst = dst_change(fire, schedule.timezone)
        rows.extend((fire, job, dst) for job in by_schedule[schedule])
    return rows[:CALENDAR_ROWS]


@lru_cache(maxsize=4096)
def _fires(schedule: Schedule, hour0: datetime) -> tuple[Counter[datetime], list[datetime]]:
    """Fires of one schedule in the week from ``hour0``, counted per hour, and the first few.
    Cached by (schedule, hour)."""
    end = hour0 + timedelta(days=CALENDAR_DAYS)
    fires: list[datetime] = []
    after = hour0
    while len(fires) < FIRES_PER_SCHEDULE:  # in steps, so a yearly job stops after one
        step = upcoming(schedule, after, 120)
        fires.extend(f for f in step if f < end)
        if len(step) < 120 or step[-1] >= end:
            break
        after = step[-1]
    per_hour = Counter(f.replace(minute=0, second=0, microsecond=0) for f in fires)
    return per_hour, fires[:CALENDAR_ROWS]
