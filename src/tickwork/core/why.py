""" "Why isn't it running?": reasons computed from the gates the scheduler and workers apply.

The store gathers the facts a run's gates look at (``WhyFacts``: its job, its task runs, the
older unfinished runs, its pools and their holders, the previous run's tasks, the live
workers, what is queued ahead, whether a scheduler leads); ``explain_run`` and
``explain_job`` turn them into plain sentences. The rules mirror ``store/gates.py`` (pools,
``max_active_runs``, ``depends_on_past``), ``store/dispatch.py`` (paused jobs, due times) and
the workers (queues, slots): the same facts the scheduler decides by, never a separate guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tickwork.core.model import Job, Run, RunState, ScheduleKind, TaskRun, TaskRunState

S = TaskRunState
#: A worker registered with this queue takes every queue (``tickwork up``'s default).
EVERY_QUEUE = "*"
_DONE_FOR_PAST = frozenset({S.SUCCESS, S.SKIPPED})
_FINISHED_TASK = frozenset({S.SUCCESS, S.FAILED, S.CANCELLED, S.SKIPPED, S.UPSTREAM_FAILED})
_FINISHED_RUN = frozenset({RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED})


@dataclass(frozen=True, slots=True)
class Reason:
    """One answer: a stable ``code`` for scripts and a sentence for people."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class PoolLoad:
    """A pool: its slots, the slots held now, and runs holding them (a few)."""

    name: str
    slots: int
    used: int
    holders: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PastTask:
    """The same task in the job's previous run (by logical date), for ``depends_on_past``."""

    run_id: str
    logical_date: datetime
    state: TaskRunState


@dataclass(frozen=True, slots=True)
class LiveWorker:
    """A worker that heart-beat recently."""

    id: str
    queues: tuple[str, ...]
    concurrency: int
    running: int


@dataclass(frozen=True, slots=True)
class WhyFacts:
    """What the gates of a run look at, read in one snapshot."""

    job: Job | None  # None: deleted
    run: Run | None = None
    task_runs: tuple[TaskRun, ...] = ()
    older_active: tuple[str, ...] = ()  # the job's unfinished runs older than ``run``
    pools: Mapping[str, PoolLoad] = field(default_factory=dict)
    past: Mapping[str, PastTask] = field(default_factory=dict)  # task name -> previous
    workers: tuple[LiveWorker, ...] | None = None  # None: not known (no registry answer)
    queued_ahead: Mapping[str, int] = field(default_factory=dict)  # task run id -> count
    leader: bool | None = None  # a scheduler leads now; None: not known (embedded: always)
    cancelled_by: str | None = None  # the token that cancelled the run (from the audit log)


def explain_run(facts: WhyFacts, now: datetime) -> list[Reason]:
    """Why ``facts.run`` is where it is; one reason per waiting task, deduplicated."""
    run = facts.run
    assert run is not None
    if run.state in _FINISHED_RUN:
        return [_finished(run, facts.task_runs, facts.cancelled_by)]
    reasons: list[Reason] = []
    if facts.job is None:
        reasons.append(Reason("job_deleted", "the job was deleted; its runs were cancelled"))
    elif facts.job.paused:
        reasons.append(Reason("job_paused", f"job {facts.job.name!r} is paused"))
    for tr in facts.task_runs:
        reasons += _task(tr, facts, now)
    return _unique(reasons) or [Reason("unknown", "nothing is holding it back")]


def explain_job(facts: WhyFacts, now: datetime, waiting: Sequence[WhyFacts] = ()) -> list[Reason]:
    """Why a job is not running now: its own state, then the first of its unfinished runs
    (``waiting``, oldest first) and what holds it."""
    job = facts.job
    assert job is not None
    reasons: list[Reason] = []
    if job.paused:
        reasons.append(Reason("job_paused", f"job {job.name!r} is paused"))
    if job.schedule.kind is ScheduleKind.CRON and job.next_fire_at is None:
        reasons.append(
            Reason("job_ended", f"job {job.name!r} has ended: its schedule has no more fires")
        )
    elif job.next_fire_at is not None and job.next_fire_at > now:
        at = job.next_fire_at
        reasons.append(Reason("not_due", f"next fire not due until {_at(at)} ({_in(at, now)})"))
    if facts.leader is False:
        reasons.append(_NO_LEADER)
    for run_facts in waiting[:1]:
        assert run_facts.run is not None
        prefix = f"run {run_facts.run.id} ({_at(run_facts.run.logical_date)}): "
        reasons += [Reason(r.code, prefix + r.message) for r in explain_run(run_facts, now)]
    if not waiting and not reasons:
        reasons.append(Reason("idle", "no run is waiting"))
    return _unique(reasons)


_NO_LEADER = Reason("no_leader", "no scheduler leader right now: nothing is being queued")


def _task(tr: TaskRun, facts: WhyFacts, now: datetime) -> list[Reason]:
    if tr.state is S.PENDING:
        return [_upstream(tr, facts.task_runs)]
    if tr.state in (S.SCHEDULED, S.UP_FOR_RETRY):
        return _waiting(tr, facts, now)
    if tr.state is S.QUEUED:
        return [_queued(tr, facts, now)]
    if tr.state is S.RUNNING:
        since = _at(tr.started_at) if tr.started_at else "?"
        return [
            Reason("running", f"task {tr.task_name} is running on {tr.worker_id} since {since}")
        ]
    return []


def _upstream(tr: TaskRun, siblings: Sequence[TaskRun]) -> Reason:
    by_name = {s.task_name: s for s in siblings}
    pending = [
        u for u in tr.upstream if by_name.get(u) is None or by_name[u].state not in _FINISHED_TASK
    ]
    names = ", ".join(pending) or ", ".join(tr.upstream)
    return Reason(
        "upstream_pending", f"task {tr.task_name} waits for upstream tasks still pending: {names}"
    )


def _waiting(tr: TaskRun, facts: WhyFacts, now: datetime) -> list[Reason]:
    if tr.due_at > now:
        until = f"until {_at(tr.due_at)} ({_in(tr.due_at, now)})"
        if tr.state is S.UP_FOR_RETRY or tr.attempt > 1:
            return [Reason("retry_backoff", f"task {tr.task_name}: retry backoff {until}")]
        return [Reason("not_due", f"task {tr.task_name} is not due {until}")]
    gates = _gates(tr, facts)
    if gates:
        return gates
    if facts.job is not None and facts.job.paused:
        return []  # said once for the run
    if facts.leader is False:
        return [_NO_LEADER]
    return [Reason("due", f"task {tr.task_name} is due; the scheduler queues it on its next pass")]


def _gates(tr: TaskRun, facts: WhyFacts) -> list[Reason]:
    """The admission gates of ``store/gates.py``, in its order."""
    found: list[Reason] = []
    job = facts.job
    limit = None if job is None else job.max_active_runs
    if limit is not None and len(facts.older_active) >= limit:
        runs = ", ".join(facts.older_active[:5])
        text = f"waiting for max_active_runs ({limit}): runs {runs} active"
        found.append(Reason("max_active_runs", text))
    pool = facts.pools.get(tr.pool) if tr.pool else None
    if pool is not None and pool.used + tr.pool_slots > pool.slots:
        held = ", ".join(pool.holders[:5]) or "-"
        text = f"pool {pool.name} full ({pool.used}/{pool.slots} slots; held by runs {held})"
        found.append(Reason("pool_full", text))
    past = facts.past.get(tr.task_name)
    if tr.depends_on_past and past is not None and past.state not in _DONE_FOR_PAST:
        text = (
            f"task {tr.task_name} depends_on_past: waiting for the run of "
            f"{_at(past.logical_date)} ({past.run_id}, {past.state.value})"
        )
        found.append(Reason("depends_on_past", text))
    return found


def _queued(tr: TaskRun, facts: WhyFacts, now: datetime) -> Reason:
    name, queue, ahead = tr.task_name, tr.queue, facts.queued_ahead.get(tr.id, 0)
    if tr.queued_at is not None and tr.queued_at > now:
        when = f"{_at(tr.queued_at)} ({_in(tr.queued_at, now)})"
        return Reason("not_due", f"task {name} is handed out ahead, for {when}")
    serving = [w for w in facts.workers or () if {queue, EVERY_QUEUE} & set(w.queues)]
    if facts.workers is not None and not serving:
        text = f"task {name} is queued on queue {queue!r} that no live worker serves"
        return Reason("no_worker", text)
    if serving and all(w.running >= w.concurrency for w in serving):
        text = f"task {name} is queued behind {ahead} items with all workers of {queue!r} busy"
        return Reason("workers_busy", text)
    text = f"task {name} is queued on {queue!r} behind {ahead} items; a free worker takes it next"
    return Reason("queued", text)


def _finished(run: Run, task_runs: Sequence[TaskRun], cancelled_by: str | None = None) -> Reason:
    at = _at(run.finished_at) if run.finished_at else "?"
    if run.state is RunState.CANCELLED:
        by = f" by token {cancelled_by!r}" if cancelled_by else ""
        return Reason("cancelled", f"the run was cancelled{by} at {at}")
    if run.state is RunState.SKIPPED:
        return Reason("skipped", "the run was skipped (a missed fire of a job without catch-up)")
    failed = [tr.task_name for tr in task_runs if tr.state is S.FAILED]
    detail = f" (failed: {', '.join(failed)})" if failed else ""
    return Reason("finished", f"the run finished {run.state.value} at {at}{detail}")


def _unique(reasons: Sequence[Reason]) -> list[Reason]:
    seen: set[str] = set()
    out = []
    for r in reasons:
        if r.message not in seen:
            seen.add(r.message)
            out.append(r)
    return out


def _at(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%d %H:%M:%SZ")


def _in(at: datetime, now: datetime) -> str:
    """``in 3 min 12 s``."""
    seconds = max(int((at - now).total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"in {hours} h {minutes} min"
    if minutes:
        return f"in {minutes} min {secs} s"
    return f"in {secs} s"
