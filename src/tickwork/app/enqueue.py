"""Enqueueing: runs of an existing job with per-run params, task-queue style.

The job is planned once per batch: one template run (its task runs, effective policies,
initial states) for the items due now and one for the delayed ones. Each item then only
gets its own ids, its task configs with its params (checked against the job's contract and
passed as ``trigger`` passes them: never over a stored kwarg), and
optionally its own priority and due instant: the store builds its rows from the template,
without a record per run.

An enqueued run has trigger ``enqueue`` and the enqueue instant as its logical date; unlike
the other runs, many may share a job and logical date. Like a manual trigger, enqueueing
does not look at the pause state: a run queued at once runs; one that waits for the
scheduler (a due instant, a pool or run limit) waits for the job's resume, as every
scheduled run of a paused job does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.app.enqueue_group import EnqueueGroups
from tickwork.app.job_changes import config_for_run
from tickwork.core.errors import Conflict, ValidationError
from tickwork.core.model import Job, NewRun, RunState, RunTrigger, TaskRunState
from tickwork.core.params import resolve_params
from tickwork.core.runs import new_run
from tickwork.ports import (
    Broker,
    Delivery,
    EnqueueEntry,
    JobChanged,
    KeyReceipt,
    RunCopy,
    SendsAhead,
    Store,
)

#: The most items ``enqueue_many`` takes in one call (one transaction).
MAX_ENQUEUE_BATCH = 5000
#: How many jobs ``Services`` keeps for enqueueing (emptied when full).
ENQUEUE_JOB_CACHE = 1000
#: Calls of up to this many items are written with the concurrent ones (``enqueue_group``).
GROUP_ITEMS = 10


@dataclass(frozen=True, slots=True)
class EnqueueItem:
    """One run to enqueue: ``params`` (checked by the job's contract, passed as ``trigger``
    passes them),
    ``priority`` (-100..100, for every task of the run; default: the job's) and ``at``, the
    instant it is due (default, or an instant already past: now)."""

    params: Mapping[str, Any] | None = None
    priority: int | None = None
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Enqueued:
    """An enqueued run: its id and its task runs' ids, in the job's task order."""

    run_id: str
    task_run_ids: tuple[str, ...]


@dataclass(slots=True)
class Templates:
    """The runs of ``job`` that enqueued runs copy: one whose root tasks queue at once and one
    that waits for the scheduler, each planned on first use, at ``now``. Each copy has its own
    ids and instants (``RunCopy``), so the enqueuer keeps one ``Templates`` per job version:
    planning a run (``new_run``) and turning it into rows (``rows_of_copies``) were ~110 of
    ~165 µs of the single enqueue's own work (plan, rows, statement) on the bench machine."""

    job: Job
    now: datetime
    make_id: Callable[[], str]
    now_run: NewRun | None = None
    later_run: NewRun | None = None

    def of(self, delayed: bool) -> NewRun:
        if delayed:
            if self.later_run is None:
                self.later_run = self._plan(TaskRunState.SCHEDULED)
            return self.later_run
        if self.now_run is None:
            self.now_run = self._plan(TaskRunState.QUEUED)
        return self.now_run

    def _plan(self, state: TaskRunState) -> NewRun:
        return new_run(
            self.job, self.now, trigger=RunTrigger.ENQUEUE, now=self.now,
            make_id=self.make_id, state=state, due_at=self.now,
        )  # fmt: skip


def plan_copies(
    job: Job,
    items: Sequence[EnqueueItem],
    now: datetime,
    make_id: Callable[[], str],
    *,
    prefix: str | None,
    hold: bool = False,
    templates: Templates | None = None,
) -> list[RunCopy]:
    """The runs to insert for ``items``, enqueued at ``now``. Errors name the field, under
    ``prefix[i].`` for a batch (``items[3].priority``). ``hold``: every run waits for the
    scheduler, even one due now (the transactional outbox cannot publish before its caller
    commits). ``templates``: ``job``'s, kept from an earlier call (default: planned now)."""
    if templates is None:
        templates = Templates(job, now, make_id)
    copies: list[RunCopy] = []
    for i, item in enumerate(items):
        where = f"{prefix}[{i}]." if prefix else ""
        _check(item, where)
        params = resolve_params(job.params, item.params, f"{where}params")
        due = item.at if item.at is not None and item.at > now else None
        template = templates.of(hold or due is not None)
        task_runs = template.task_runs
        configs = (
            tuple(config_for_run(tr.kind, tr.config, params) for tr in task_runs)
            if params
            else tuple(tr.config for tr in task_runs)
        )
        copies.append(
            RunCopy(
                template=template,
                run_id=make_id(),
                task_run_ids=tuple(make_id() for _ in task_runs),
                configs=configs,
                priority=item.priority,
                due_at=due,
                enqueued_at=now,
            )
        )
    return copies


class Enqueuer:
    """The enqueue use case of ``Services``: plan, store in one transaction, publish.

    Jobs enqueued to are kept (up to ENQUEUE_JOB_CACHE): the write's own transaction checks
    that the kept job is still the stored one (``planned_from``), so a single enqueue costs
    one transaction, and a changed job is read again and planned anew. A call of a few items
    shares its transaction with the calls made meanwhile (``enqueue_group``): each still
    returns only once its runs are committed, and fails alone.
    """

    def __init__(
        self,
        store: Store,
        broker: Broker,
        *,
        get_job: Callable[[str], Awaitable[Job]],
        clock: Callable[[], datetime],
        make_id: Callable[[], str],
        wake: Callable[[], None],
    ) -> None:
        self._store, self._broker, self._get_job = store, broker, get_job
        self._clock, self._make_id, self._wake = clock, make_id, wake
        self._jobs: dict[str, Templates] = {}  # by job name: the job kept, its templates
        # The runs are durable at the commit: a broker that can answer the caller before its
        # server's reply does (``SendsAhead``; a lost publish is the Resender's, as ever).
        publish = broker.send_ahead if isinstance(broker, SendsAhead) else broker.publish
        self._groups = EnqueueGroups(store, publish, lambda e: deliveries_of(e.copies))

    async def enqueue(
        self,
        name: str,
        items: Sequence[EnqueueItem],
        receipt: Callable[[list[Enqueued]], KeyReceipt] | None,
        prefix: str | None,
        check: Callable[[Job], None] | None = None,
    ) -> list[Enqueued]:
        for fresh in (False, True):
            templates = await self._templates(name, fresh)
            job = templates.job
            if check is not None:
                check(job)
            now = self._clock()
            copies = plan_copies(job, items, now, self._make_id, prefix=prefix, templates=templates)
            done = [Enqueued(c.run_id, c.task_run_ids) for c in copies]
            key = None if receipt is None else receipt(done)
            try:
                await self._write(copies, key, job)
                break
            except JobChanged:  # changed since it was kept: plan again from the stored one
                self._jobs.pop(name, None)
                if fresh:
                    raise Conflict("job", f"job {name!r} changed meanwhile; retry") from None
        if any(c.template.run.state is RunState.SCHEDULED for c in copies):
            self._wake()  # delayed, or gated by a pool or run limit: the scheduler takes them
        return done

    async def _write(self, copies: list[RunCopy], key: KeyReceipt | None, job: Job) -> None:
        """Store and publish: a few runs with the concurrent calls' (group commit), many in
        a transaction of their own."""
        if len(copies) <= GROUP_ITEMS:
            await self._groups.write(EnqueueEntry(copies, key, job))
            return
        await self._store.enqueue_runs(copies, key, planned_from=job)
        await self._broker.publish(deliveries_of(copies))

    async def _templates(self, name: str, fresh: bool) -> Templates:
        templates = None if fresh else self._jobs.get(name)
        if templates is None:
            job = await self._get_job(name)
            templates = Templates(job, self._clock(), self._make_id)
            if len(self._jobs) >= ENQUEUE_JOB_CACHE:
                self._jobs.clear()
            self._jobs[name] = templates
        return templates


def deliveries_of(copies: Sequence[RunCopy]) -> list[Delivery]:
    """What to publish after the commit: the task runs stored ``queued``."""
    out: list[Delivery] = []
    for c in copies:
        for task_run_id, tr in zip(c.task_run_ids, c.template.task_runs, strict=True):
            if tr.state is TaskRunState.QUEUED:
                priority = tr.priority if c.priority is None else c.priority
                out.append(Delivery(task_run_id, 1, tr.queue, priority))
    return out


def _check(item: EnqueueItem, where: str) -> None:
    priority = item.priority
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or not -100 <= priority <= 100
    ):
        raise ValidationError(f"{where}priority", "must be a whole number from -100 to 100")
    if item.at is not None and item.at.utcoffset() is None:
        raise ValidationError(f"{where}at", "must include a UTC offset, e.g. 2026-12-01T10:00:00Z")
    if item.params is not None and not isinstance(item.params, Mapping):
        raise ValidationError(f"{where}params", "must be an object")
