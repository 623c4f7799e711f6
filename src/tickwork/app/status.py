"""``tickwork status`` as a service: the leader and standbys, workers by queue, queue depths
and ages, and warnings, from one cached snapshot of the database (``observe.facts``).

The same for both modes: ``tickwork up`` registers itself as an ``embedded`` process (it
schedules and works), distributed processes as ``scheduler`` and ``worker``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwork import __version__
from tickwork.observe.facts import FactsSource, Snapshot
from tickwork.ports import Store, WorkerInfo
from tickwork.ports.alerts import AlertSummary, FiredAlert

#: A ``status`` answer is read fresh (seconds of cache: none): ``job add`` asks it right after
#: a worker may have started, and its few indexed queries cost less than a stale answer.
STATUS_MAX_AGE = 0.0
#: Run alerts (missed start deadlines, SLA misses) are counted over this last span.
ALERT_SPAN = timedelta(hours=1)
#: The newest alerts a status names.
ALERTS_SHOWN = 10
_NO_ALERTS = AlertSummary(0, 0, [])


@dataclass(frozen=True, slots=True)
class StatusWarning:
    # no_leader, unserved_queue, missed_fires, missed_runs, sla_misses, dead_letters,
    # lost_workers
    code: str
    message: str
    queue: str | None = None


@dataclass(frozen=True, slots=True)
class QueueStatus:
    queue: str
    due: int
    queued: int
    running: int
    oldest_seconds: float | None
    workers: int  # live workers taking this queue
    busy: int
    free: int


@dataclass(frozen=True, slots=True)
class ProcessStatus:
    info: WorkerInfo
    live: bool


@dataclass(frozen=True, slots=True)
class StatusReport:
    taken_at: datetime
    version: str
    schema_revision: str | None
    mode: str  # embedded | distributed
    leader: str | None
    epoch: int | None
    lease_expires_at: datetime | None
    standbys: list[str]
    workers: list[ProcessStatus]
    queues: list[QueueStatus]
    served: list[str]  # queues some live worker takes (``*``: every queue)
    dead_letters: int
    missed_fires: int  # in the last hour
    alerts: AlertSummary = _NO_ALERTS  # run alerts fired in the last hour (ALERT_SPAN)
    warnings: list[StatusWarning] = field(default_factory=list)


class StatusService:
    def __init__(self, store: Store, facts: FactsSource) -> None:
        self._store = store
        self._facts = facts

    async def report(self) -> StatusReport:
        snap = await self._facts.snapshot(STATUS_MAX_AGE)
        revision = await self._store.schema_revision()
        alerts = await self._store.recent_alerts(snap.taken_at - ALERT_SPAN, limit=ALERTS_SHOWN)
        return build_report(snap, revision, alerts)

    async def unserved(self, queues: set[str]) -> list[str]:
        """Of ``queues``, those no live worker takes (for ``job add``'s warning)."""
        snap = await self._facts.snapshot(STATUS_MAX_AGE)
        return sorted(q for q in queues if not snap.serves(q))


def build_report(
    snap: Snapshot, revision: str | None, alerts: AlertSummary = _NO_ALERTS
) -> StatusReport:
    leader = snap.leader
    lease = snap.lease if snap.lease is not None and snap.lease.holder == leader else None
    embedded = any(w.kind == "embedded" and snap.live(w) for w in snap.processes)
    standbys = [w.id for w in snap.schedulers if w.id != leader and snap.live(w)]
    workers = [ProcessStatus(w, snap.live(w)) for w in snap.workers]
    queues = _queues(snap)
    report = StatusReport(
        taken_at=snap.taken_at,
        version=__version__,
        schema_revision=revision,
        mode="embedded" if embedded else "distributed",
        leader=leader,
        epoch=None if lease is None else lease.token,
        lease_expires_at=None if lease is None else lease.expires_at,
        standbys=standbys,
        workers=workers,
        queues=queues,
        served=sorted({q for w in workers if w.live for q in w.info.queues}),
        dead_letters=snap.facts.dead_letters,
        missed_fires=snap.facts.missed_fires,
        alerts=alerts,
    )
    report.warnings.extend(warnings(report, snap))
    return report


def _queues(snap: Snapshot) -> list[QueueStatus]:
    names = {f.queue for f in snap.facts.queues}
    names |= {q for w in snap.workers if snap.live(w) for q in w.queues if q != "*"}
    found = []
    for queue in sorted(names):
        counts = {"due": 0, "queued": 0, "running": 0}
        for f in snap.facts.queues:
            if f.queue == queue:
                counts[f.state] += f.count
        taking = [w for w in snap.workers if snap.live(w) and {queue, "*"} & set(w.queues)]
        busy = sum(w.running for w in taking)
        free = sum(max(w.concurrency - w.running, 0) for w in taking)
        age = snap.oldest_age(queue)
        found.append(
            QueueStatus(
                queue, **counts, oldest_seconds=age, workers=len(taking), busy=busy, free=free
            )
        )
    return found


def alert_warnings(alerts: AlertSummary) -> list[StatusWarning]:
    """Warnings for the run alerts of the last hour, naming the newest runs of each kind."""
    found: list[StatusWarning] = []
    for code, count, what in (
        ("missed_runs", alerts.missed, "did not start within their job's start_deadline"),
        ("sla_misses", alerts.sla_misses, "did not finish within their job's sla"),
    ):
        if count:
            runs = _named([a for a in alerts.newest if a.kind.value == _KINDS[code]])
            found.append(StatusWarning(code, f"{count} run(s) {what} in the last hour: {runs}"))
    return found


_KINDS = {"missed_runs": "on_missed", "sla_misses": "on_sla_miss"}


def _named(fired: list[FiredAlert]) -> str:
    shown = ", ".join(f"{a.job_name} {a.logical_date:%Y-%m-%d %H:%M} ({a.run_id})" for a in fired)
    return shown + " (see `tickwork job ledger`)" if shown else "see `tickwork job ledger`"


def warnings(report: StatusReport, snap: Snapshot) -> list[StatusWarning]:
    found: list[StatusWarning] = []
    if report.leader is None:
        found.append(StatusWarning("no_leader", "no scheduler leads: nothing is being scheduled"))
    for q in report.queues:
        if (q.due or q.queued) and q.workers == 0:
            found.append(
                StatusWarning(
                    "unserved_queue",
                    f"queue {q.queue!r} has {q.due + q.queued} task run(s) waiting and no live "
                    f"worker takes it (start one with --queues {q.queue})",
                    q.queue,
                )
            )
    if report.missed_fires:
        found.append(
            StatusWarning(
                "missed_fires",
                f"{report.missed_fires} cron fire(s) missed in the last hour (recorded as "
                "skipped: the scheduler was down or behind)",
            )
        )
    found.extend(alert_warnings(report.alerts))
    if report.dead_letters:
        found.append(
            StatusWarning(
                "dead_letters",
                f"{report.dead_letters} dead-lettered task run(s): "
                "see `tickwork run list --state dead`",
            )
        )
    lost = [w.info.id for w in report.workers if not w.live]
    if lost:
        found.append(
            StatusWarning(
                "lost_workers", f"{len(lost)} worker(s) silent for over 15 s: {', '.join(lost)}"
            )
        )
    return found
