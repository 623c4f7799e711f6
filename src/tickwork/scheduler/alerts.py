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
from functools import partial
from typing import Protocol

from tickwork.core.alerts import Alert, AlertKind, due_alerts
from tickwork.core.model import CallbackEvent, Job
from tickwork.hooks import AlertContext, Hooks
from tickwork.ports import Fence, JobStore
from tickwork.ports.alerts import AlertCandidate, AlertStore

log = logging.getLogger("tickwork.scheduler.alerts")

#: How far back a leader's first look reaches: limits passed while no leader looked (a
#: failover, a restart) still alert, unless they passed longer ago than this.
DEFAULT_LOOKBACK = timedelta(hours=1)
#: How long after its record an alert whose callback never ran is fired again, at least.
DEFAULT_REFIRE_AFTER = timedelta(minutes=1)
#: How many such alerts one look fires again, at most.
REFIRE_BATCH = 100

#: An alert's key: its run and kind.
Key = tuple[str, AlertKind]


class AlertWatcherStore(AlertStore, JobStore, Protocol):
    """What the alert watcher needs of the store: alert candidates and records, their jobs."""


class AlertWatcher:
    """Looks for due alerts; :meth:`check` once in a while (the loop's housekeeping).

    Each alert's callback is handed to ``hooks`` with a note of when it ran to its end;
    the next look marks those done (fenced). Alerts on record and not done ``refire_after``
    after they were recorded (by this leader or one before it) are fired again, except those
    this watcher has in flight. ``refire_after`` defaults to twice the hooks' timeout, at
    least :data:`DEFAULT_REFIRE_AFTER`: an older leader's callback still running is not
    doubled."""

    def __init__(
        self,
        store: AlertWatcherStore,
        *,
        fence: Callable[[], Fence | None],
        hooks: Hooks | None = None,
        lookback: timedelta = DEFAULT_LOOKBACK,
        refire_after: timedelta | None = None,
    ) -> None:
        self._store = store
        self._fence = fence
        self._hooks = hooks
        self._lookback = lookback
        self._refire_after = refire_after or _refire_after(hooks)
        self._since: datetime | None = None
        self._in_flight: set[Key] = set()  # handed to the hooks, not marked done yet
        self._done: set[Key] = set()  # ran to their end, to mark

    async def check(self, now: datetime) -> list[Alert]:
        """Record and fire the alerts due at ``now``, fire again those whose callback never
        ran, mark those that ran; returns the alerts this call recorded."""
        recorded: list[Alert] = []
        since = self._since if self._since is not None else now - self._lookback
        if now > since:
            candidates = await self._store.alert_candidates(since, now)
            due = _due(candidates, now)
            fence = self._fence()
            recorded = await self._store.record_alerts(due, now, fence=fence) if due else []
            self._since = now  # only once recorded: a failed look is looked at again
            await self._fire([(a, now) for a in recorded])
        await self._refire(now)
        await self.mark_done(now)
        return recorded

    async def mark_done(self, now: datetime) -> None:
        """Mark done the alerts whose callback ran to its end since the last mark."""
        if not self._done:
            return
        keys = sorted(self._done, key=lambda k: (k[0], k[1].value))
        await self._store.mark_hooks_done(keys, now, fence=self._fence())
        self._done.difference_update(keys)
        self._in_flight.difference_update(keys)

    async def _refire(self, now: datetime) -> None:
        unfired = await self._store.unfired_alerts(now - self._refire_after, REFIRE_BATCH)
        again: list[tuple[Alert, datetime]] = []
        for u in unfired:
            key = (u.run_id, u.kind)
            if key in self._in_flight or key in self._done:
                continue
            if u.alert is None:  # its run is gone: nothing to tell
                self._done.add(key)
                continue
            log.warning(
                "%s callback of run %s recorded at %s never ran to its end: firing it again",
                u.kind.value, u.run_id, u.fired_at.isoformat(),
            )  # fmt: skip
            again.append((u.alert, u.fired_at))
        await self._fire(again, logged=True)

    async def _fire(
        self, alerts: Sequence[tuple[Alert, datetime]], *, logged: bool = False
    ) -> None:
        jobs: dict[str, Job | None] = {}
        for alert, fired_at in alerts:
            run = alert.run
            if not logged:
                log.warning(
                    "run %s of job %s (%s) %s: %s late",
                    run.run_id, run.job_name, run.logical_date.isoformat(),
                    _WHAT[alert.kind.value], alert.late_by,
                )  # fmt: skip
            key = (run.run_id, alert.kind)
            if run.job_name not in jobs and self._hooks is not None:
                jobs[run.job_name] = await self._store.get_job(run.job_name)
            job = jobs.get(run.job_name)
            callback = None if job is None else job.callbacks.get(CallbackEvent(alert.kind.value))
            if self._hooks is None or callback is None:
                self._done.add(key)  # nothing to fire: done as it is
                continue
            self._in_flight.add(key)
            context = AlertContext.of(alert, fired_at)
            self._hooks.fire_alert(callback, context, partial(self._finished, key))

    def _finished(self, key: Key, ran: bool) -> None:
        if ran:
            self._done.add(key)
        else:  # dropped or cancelled: fired again after refire_after
            self._in_flight.discard(key)


def _refire_after(hooks: Hooks | None) -> timedelta:
    timeout = timedelta(seconds=2 * (hooks.timeout if hooks is not None else 0))
    return max(DEFAULT_REFIRE_AFTER, timeout)


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
