"""The leader's alert check: runs that missed their start deadline or their SLA.

Each look reads the runs whose limit instant (logical date + start deadline, or + SLA) fell
since the previous look (``AlertStore.alert_candidates``: index ranges, so the cost follows
the window, not the history), asks the pure core which owe an alert, records those in one
fenced transaction and fires the job's ``on_missed`` / ``on_sla_miss`` hook for each one that
was new. The record is the once: a ``(run, kind)`` key, written under the leader's fence, so
an old leader cannot record after a takeover, and a new leader that looks at the same window
again (it starts ``lookback`` in the past) finds the alerts already on record and fires none.
A leader that dies between the record and its callback loses that callback: at most once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from tickwork.core.alerts import Alert, due_alerts
from tickwork.core.model import CallbackEvent, Job
from tickwork.hooks import AlertContext, Hooks
from tickwork.ports import Fence, JobStore
from tickwork.ports.alerts import AlertCandidate, AlertStore

log = logging.getLogger("tickwork.scheduler.alerts")

#: How far back a leader's first look reaches: limits passed while no leader looked (a
#: failover, a restart) still alert, unless they passed longer ago than this.
DEFAULT_LOOKBACK = timedelta(hours=1)


class AlertWatcherStore(AlertStore, JobStore, Protocol):
    """What the alert watcher needs of the store: alert candidates and records, their jobs."""


class AlertWatcher:
    """Looks for due alerts; :meth:`check` once in a while (the loop's housekeeping)."""

    def __init__(
        self,
        store: AlertWatcherStore,
        *,
        fence: Callable[[], Fence | None],
        hooks: Hooks | None = None,
        lookback: timedelta = DEFAULT_LOOKBACK,
    ) -> None:
        self._store = store
        self._fence = fence
        self._hooks = hooks
        self._lookback = lookback
        self._since: datetime | None = None

    async def check(self, now: datetime) -> list[Alert]:
        """Record and fire the alerts due at ``now``; returns those this call recorded."""
        since = self._since if self._since is not None else now - self._lookback
        if now <= since:
            return []
        candidates = await self._store.alert_candidates(since, now)
        due = _due(candidates, now)
        recorded = await self._store.record_alerts(due, now, fence=self._fence()) if due else []
        self._since = now  # only once recorded: a failed look is looked at again
        if recorded:
            await self._fire(recorded, now)
        return recorded

    async def _fire(self, recorded: Sequence[Alert], now: datetime) -> None:
        jobs: dict[str, Job | None] = {}
        for alert in recorded:
            run = alert.run
            log.warning(
                "run %s of job %s (%s) %s: %s late",
                run.run_id, run.job_name, run.logical_date.isoformat(), _WHAT[alert.kind.value],
                alert.late_by,
            )  # fmt: skip
            if self._hooks is None:
                continue
            if run.job_name not in jobs:
                jobs[run.job_name] = await self._store.get_job(run.job_name)
            job = jobs[run.job_name]
            callback = None if job is None else job.callbacks.get(CallbackEvent(alert.kind.value))
            if callback is not None:
                self._hooks.fire_alert(callback, AlertContext.of(alert, now))


_WHAT = {
    CallbackEvent.ON_MISSED.value: "missed its start deadline",
    CallbackEvent.ON_SLA_MISS.value: "missed its SLA",
}


def _due(candidates: Sequence[AlertCandidate], now: datetime) -> list[Alert]:
    """The alerts the candidates owe, each of the kind its window was read for, once."""
    seen: set[tuple[str, str]] = set()
    due: list[Alert] = []
    for c in candidates:
        for alert in due_alerts([c.run], c.policy, now):
            key = (alert.run.run_id, alert.kind.value)
            if alert.kind is c.kind and key not in seen:
                seen.add(key)
                due.append(alert)
    return due
