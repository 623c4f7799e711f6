"""Application services: one async method per use case, shared by every edge (API, CLI, SDK).

Each method is thin: validate with the core, make one store call (one transaction), then
publish to the broker or wake the scheduler. Nothing here knows about HTTP.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeAlias, TypeVar

from tickwork.app.backfills import BackfillService
from tickwork.app.checks import check_limit, require_aware
from tickwork.app.enqueue import MAX_ENQUEUE_BATCH, Enqueued, EnqueueItem, Enqueuer
from tickwork.app.first_runs import first_runs, job_from, queued_run, refuse_duplicate_names
from tickwork.app.job_changes import changed_job, with_params
from tickwork.app.ledger import LedgerService
from tickwork.app.pools import PoolService
from tickwork.app.records import JobPage, JobSpec, Upcoming
from tickwork.app.run_cases import RunCases
from tickwork.app.secrets import check_secret_refs
from tickwork.app.targets import check_targets
from tickwork.app.why import LeaderProbe, WhyService
from tickwork.core.errors import Conflict, NotFound, ValidationError
from tickwork.core.jitter import effective_jitter, spread_fires
from tickwork.core.model import (
    Job,
    NewRun,
    RunDetail,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    TaskRun,
    TaskRunState,
)
from tickwork.core.params import resolve_params
from tickwork.core.schedule import upcoming, validate_schedule
from tickwork.core.validate import validate_job
from tickwork.ids import new_id
from tickwork.ports import (
    Broker,
    CancelSignals,
    Delivery,
    JobFilter,
    KeyReceipt,
    Store,
)

_R = TypeVar("_R")
#: Renders the response of a write from what it is about to write, as the ``KeyReceipt`` of
#: its ``Idempotency-Key``; the store records it in the write's transaction (the API's).
Receipt: TypeAlias = Callable[[_R], KeyReceipt]


def utc_now() -> datetime:
    """The wall clock, in UTC (the default clock of the services)."""
    return datetime.now(UTC)


class Services(RunCases):
    """The use cases of tickwork over a store and a broker.

    ``wake`` tells the scheduler that new timed work exists (an ``at`` run, a resumed job, a
    retried run) so it re-plans without waiting out its sleep. ``cancels`` tells workers at
    once to stop attempts whose cancellation was requested (without it they learn on their
    next heartbeat). ``leader`` (distributed mode) tells whether a scheduler holds the lease
    now, for "why isn't it running?". ``clock``, ``rand`` and ``make_id`` are injected so
    tests control time and identity.
    """

    def __init__(
        self,
        store: Store,
        broker: Broker,
        *,
        wake: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = utc_now,
        rand: Callable[[], float] = random.random,
        make_id: Callable[[], str] = new_id,
        url_guard: Callable[[str], Awaitable[None]] | None = None,
        cancels: CancelSignals | None = None,
        leader: LeaderProbe | None = None,
        cron_spread: float = 0.0,
    ) -> None:
        self.store = store
        self._cron_spread = cron_spread
        self.broker = broker
        self._cancels = cancels
        self._wake = wake
        self._clock = clock
        self._rand = rand
        self._make_id = make_id
        self._url_guard = url_guard
        # Pools (operator settings), and the check that jobs name only existing ones.
        self.pools = PoolService(store, clock)
        self.why = WhyService(store, clock, leader)
        self.ledger = LedgerService(store, get_job=self.get_job, clock=clock, spread=cron_spread)
        self.backfills = BackfillService(
            store, get_job=self.get_job, clock=clock, make_id=make_id, wake=wake, cancels=cancels
        )
        self._enqueuer = Enqueuer(
            store, broker, get_job=self.get_job, clock=clock, make_id=make_id, wake=wake
        )

    def now(self) -> datetime:
        """The services' clock."""
        return self._clock()

    # -- jobs ------------------------------------------------------------------------------

    async def create_job(
        self, spec: JobSpec, *, allow_past: bool = False, receipt: Receipt[Job] | None = None
    ) -> Job:
        """Validate and store one job with its first run (``now`` / ``at``) or next fire."""
        of_batch = None if receipt is None else lambda jobs: receipt(jobs[0])
        return (await self.create_jobs([spec], allow_past=allow_past, receipt=of_batch))[0]

    async def create_jobs(
        self,
        specs: Sequence[JobSpec],
        *,
        allow_past: bool = False,
        receipt: Receipt[list[Job]] | None = None,
    ) -> list[Job]:
        """Create many jobs in one store transaction: all of them, or none.

        Errors name the item (``jobs[3].schedule.cron``) when more than one job is given.
        ``receipt``: see ``Receipt``.
        """
        now = self._clock()
        items = [
            self._plan_job(spec, i, len(specs), now, allow_past) for i, spec in enumerate(specs)
        ]
        jobs = [job for job, _ in items]
        refuse_duplicate_names(jobs, len(specs))
        await self.check_jobs(jobs)
        await self.store.create_jobs(items, None if receipt is None else receipt(jobs))
        await self._after_create([run for _, runs in items for run in runs])
        return jobs

    async def get_job(self, name: str) -> Job:
        """The live job called ``name``; ``NotFound`` otherwise."""
        job = await self.store.get_job(name)
        if job is None:
            raise NotFound("job", name)
        return job

    async def _history_job_id(self, name: str) -> str:
        """The job whose runs ``--job NAME`` means: the live one, else the last deleted."""
        job_id = await self.store.history_job_id(name)
        if job_id is None:
            raise NotFound("job", name)
        return job_id

    async def list_jobs(
        self, *, limit: int = 100, after: str | None = None, where: JobFilter | None = None
    ) -> JobPage:
        """Live jobs matching ``where``, by name, ``limit`` at a time, after the name ``after``."""
        check_limit(limit, 1000)
        if where is not None and where.schedule_kind not in (None, *ScheduleKind):
            kinds = ", ".join(ScheduleKind)
            raise ValidationError("schedule_kind", f"must be one of {kinds}")
        if where is not None and where.last_state not in (None, *RunState):
            raise ValidationError("last_state", f"must be one of {', '.join(RunState)}")
        jobs = await self.store.list_jobs(limit=limit, after=after, where=where)
        next_after = jobs[-1].name if len(jobs) == limit else None
        return JobPage(jobs=jobs, next_after=next_after)

    async def update_job(
        self, name: str, changes: Mapping[str, Any], *, allow_past: bool = False
    ) -> Job:
        """Change a job for its future runs, in one transaction; runs already created keep
        their copy of the tasks. ``changes`` maps ``UPDATABLE_FIELDS`` to core values.

        A changed cron schedule fires next after now; a changed ``now``/``at`` schedule gets
        its run as on create. The pause state is kept. A concurrent change is a ``Conflict``.
        """
        current = await self.get_job(name)
        now = self._clock()
        job, rescheduled = changed_job(current, changes, now, allow_past=allow_past)
        runs: list[NewRun] = []
        if rescheduled:
            job, runs = first_runs(job, now, self._make_id)
        await self.check_jobs([job])
        if not await self.store.update_job(job, current.updated_at, rescheduled, runs):
            raise Conflict("job", f"job {name!r} changed meanwhile; read it again and retry")
        await self._after_create(runs)
        if rescheduled:
            self._wake()
        return await self.get_job(name)

    async def delete_job(self, name: str) -> None:
        """Delete a job (its history stays) and cancel its unfinished runs."""
        job = await self.get_job(name)
        await self._tell_workers(await self.store.delete_job(job.id, self._clock()))

    async def pause(self, name: str) -> Job:
        """Stop a job from creating new runs; runs already created are not touched."""
        return await self._set_paused(name, True)

    async def resume(self, name: str) -> Job:
        """Let a paused job run again; the scheduler applies its catch-up rule to missed fires."""
        job = await self._set_paused(name, False)
        self._wake()
        return job

    async def trigger(
        self,
        name: str,
        logical_date: datetime | None = None,
        params: Mapping[str, Any] | None = None,
        *,
        receipt: Receipt[RunDetail] | None = None,
        check: Callable[[Job], None] | None = None,
    ) -> RunDetail:
        """Run a job by hand now, for ``logical_date`` (default: now). Queued at once.

        ``params`` must pass the job's params contract (``resolve_params``); they reach
        python tasks as extra keyword arguments and shell tasks as JSON in
        ``TICKWORK_PARAMS`` (see ``with_params``). A second run for the same logical date is
        a ``Conflict``. ``receipt`` (see ``Receipt``) is given the run as created. ``check``
        is called with the job before anything else (the caller's permission check).
        """
        job = await self.get_job(name)
        if check is not None:
            check(job)
        job = with_params(job, resolve_params(job.params, params))
        now = self._clock()
        require_aware(logical_date, "logical_date")
        nr = queued_run(job, logical_date or now, RunTrigger.MANUAL, now, self._make_id)
        created = RunDetail(run=nr.run, task_runs=nr.task_runs, attempts=())
        await self.store.create_runs([nr], None if receipt is None else receipt(created))
        await self._publish(nr.task_runs)
        return await self.get_run(nr.run.id)

    async def enqueue_many(
        self,
        name: str,
        items: Sequence[EnqueueItem],
        *,
        receipt: Receipt[list[Enqueued]] | None = None,
        batch: bool = True,
        check: Callable[[Job], None] | None = None,
    ) -> list[Enqueued]:
        """Enqueue runs of the job ``name``, one per item, in one transaction: all or none.

        See ``tickwork.app.enqueue``. Errors name ``items[i].field`` (``field`` alone when
        ``batch`` is false). ``receipt`` (see ``Receipt``) is given the runs' ids. ``check``
        is called with the job before anything is planned (the caller's permission check).
        """
        check_limit(len(items), MAX_ENQUEUE_BATCH, "items")
        prefix = "items" if batch else None
        return await self._enqueuer.enqueue(name, items, receipt, prefix, check)

    async def upcoming(self, name: str, count: int = 10) -> list[datetime]:
        """The next ``count`` fire times of a job, in UTC (none for a ``now`` job)."""
        check_limit(count, 1000, "count")
        return await self._fires(await self.get_job(name), count)

    async def upcoming_due(self, name: str, count: int = 10) -> Upcoming:
        """The job (loaded once), its ``upcoming`` fires and when their runs become due: moved
        by the job's jitter (or the fleet's ``cron_spread``) as the scheduler will move them."""
        check_limit(count, 1000, "count")
        job = await self.get_job(name)
        fires = await self._fires(job, count)
        jitter = effective_jitter(job.jitter, self._cron_spread)
        if job.schedule.kind is not ScheduleKind.CRON or not jitter or not fires:
            return Upcoming(job, fires, fires)
        following = [*upcoming(job.schedule, fires[-1], 1), None][0]
        return Upcoming(job, fires, spread_fires(job.name, fires, jitter, following))

    async def _fires(self, job: Job, count: int) -> list[datetime]:
        if job.schedule.kind is ScheduleKind.CRON:
            if job.next_fire_at is None:
                return []
            return [job.next_fire_at, *upcoming(job.schedule, job.next_fire_at, count - 1)]
        if job.schedule.kind is ScheduleKind.AT and await self._at_run_pending(job):
            assert job.schedule.at is not None
            return [job.schedule.at]
        return []

    def preview(
        self, cron: str, timezone: str = "UTC", count: int = 10, after: datetime | None = None
    ) -> list[datetime]:
        """The next ``count`` fires of a cron expression after ``after`` (default now). Pure.

        Errors name the parameters: ``cron``, ``timezone``, ``count``, ``after``.
        """
        check_limit(count, 1000, "count")
        require_aware(after, "after")
        start = after or self._clock()
        try:
            schedule = validate_schedule(
                Schedule(kind=ScheduleKind.CRON, cron=cron, timezone=timezone), start
            )
        except ValidationError as e:
            raise ValidationError(e.field.removeprefix("schedule."), e.reason) from None
        return upcoming(schedule, start, count)

    # -- runs ------------------------------------------------------------------------------

    async def ready(self) -> bool:
        """Whether the store answers (one primary-key read)."""
        try:
            await self.store.get_token("readyz")
        except Exception:
            return False
        return True

    async def check_jobs(self, jobs: Sequence[Job]) -> None:
        """What saving valid jobs needs besides the core's checks: every URL they call passes
        the SSRF guard, every pool they name exists and is large enough. ``ValidationError``
        on the field otherwise."""
        await check_targets(self._url_guard, jobs)
        await self.pools.check_jobs(jobs)
        await check_secret_refs(self.store, jobs)

    # -- helpers ---------------------------------------------------------------------------

    def _plan_job(
        self, spec: JobSpec, index: int, total: int, now: datetime, allow_past: bool
    ) -> tuple[Job, list[NewRun]]:
        try:
            job = validate_job(job_from(spec, now, self._make_id), now, allow_past=allow_past)
        except ValidationError as e:
            if total == 1:
                raise
            raise ValidationError(f"jobs[{index}].{e.field}", e.reason) from None
        return first_runs(job, now, self._make_id)

    async def _after_create(self, runs: Sequence[NewRun]) -> None:
        await self._publish([tr for nr in runs for tr in nr.task_runs])
        if any(tr.state is TaskRunState.SCHEDULED for nr in runs for tr in nr.task_runs):
            self._wake()

    async def _publish(self, task_runs: Sequence[TaskRun]) -> None:
        deliveries = [
            Delivery(tr.id, tr.attempt, tr.queue, tr.priority)
            for tr in task_runs
            if tr.state is TaskRunState.QUEUED
        ]
        await self.broker.publish(deliveries)

    async def _set_paused(self, name: str, paused: bool) -> Job:
        job = await self.get_job(name)
        if not await self.store.set_paused(job.id, paused, self._clock()):
            raise NotFound("job", name)  # deleted between the read and the write
        return await self.get_job(name)

    async def _at_run_pending(self, job: Job) -> bool:
        page = await self.store.list_runs(job_id=job.id, limit=1)
        return any(run.state is RunState.SCHEDULED for run in page.runs)
