"""The schedule ledger of a job, and the missed ticks of every job (for alerts, metrics and
the dashboard)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tickwork.core.alerts import policy_of
from tickwork.core.ledger import RunMark, Tick, ledger, missed, promised
from tickwork.core.model import Job, RunTrigger, ScheduleKind
from tickwork.ports import JobFilter, Store, TimeWindow

_TICK = timedelta(microseconds=1)
_PAGE = 1000


@dataclass(frozen=True, slots=True)
class MissedTick:
    """A tick of a job's schedule with no run and no reason on record."""

    job_name: str
    logical_date: datetime


class LedgerService:
    def __init__(
        self,
        store: Store,
        *,
        get_job: Callable[[str], Awaitable[Job]],
        clock: Callable[[], datetime],
        spread: float = 0.0,
    ) -> None:
        self._store = store
        self._spread = spread
        self._get_job = get_job
        self._clock = clock

    async def ledger(self, name: str, start: datetime, end: datetime) -> list[Tick]:
        """Every tick the job's schedule promised in ``[start, end]`` and what became of it."""
        job = await self._get_job(name)
        return await self._ledger(job, start, end)

    async def missed_ticks(
        self, since: datetime, until: datetime | None = None, *, job: str | None = None
    ) -> list[MissedTick]:
        """The ticks in ``[since, until]`` (default: now) of every live cron job (or of
        ``job``) whose run never came (or never started) within the job's start deadline
        (``start_deadline``, default 5 min): a bug or an outage. The one function
        alerts, metrics and the dashboard count missed runs with."""
        until = until or self._clock()
        jobs = [await self._get_job(job)] if job else await self._cron_jobs()
        found: list[MissedTick] = []
        for j in jobs:
            ticks = await self._ledger(j, since, until)
            found += [MissedTick(j.name, t.logical_date) for t in missed(ticks)]
        return found

    async def _ledger(self, job: Job, start: datetime, end: datetime) -> list[Tick]:
        ticks = promised(job, start, end)
        runs = await self._runs(job, start, end) if ticks else {}
        # A tick is late past the job's own start deadline: the alerts' and the ledger's agree.
        # (The deadline counts from the end of the job's jitter window: core.ledger.)
        grace = policy_of(job).deadline
        return ledger(job, ticks, runs, self._clock(), grace=grace, spread=self._spread)

    async def _runs(self, job: Job, start: datetime, end: datetime) -> dict[datetime, RunMark]:
        window = TimeWindow(logical_from=start, logical_to=end + _TICK)
        found: dict[datetime, RunMark] = {}
        cursor: str | None = None
        while True:
            page = await self._store.list_runs(
                job_id=job.id, limit=_PAGE, cursor=cursor, window=window
            )
            for r in page.runs:
                if r.trigger is not RunTrigger.ENQUEUE:
                    found[r.logical_date] = RunMark(
                        r.id, r.logical_date, r.state, r.trigger, r.started_at
                    )
            cursor = page.next_cursor
            if cursor is None:
                return found

    async def _cron_jobs(self) -> list[Job]:
        jobs: list[Job] = []
        after: str | None = None
        while True:
            page = await self._store.list_jobs(
                limit=_PAGE, after=after, where=JobFilter(schedule_kind=ScheduleKind.CRON)
            )
            jobs += page
            if len(page) < _PAGE:
                return jobs
            after = page[-1].name
