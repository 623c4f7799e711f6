"""The ``AlertStore`` port: runs whose start deadline or SLA just passed, and the alerts
fired (``core.alerts``), recorded once per (run, kind)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tickwork.core.alerts import Alert, AlertKind, AlertPolicy, WatchedRun
from tickwork.ports.coordination import Fence


@dataclass(frozen=True, slots=True)
class AlertCandidate:
    """A run whose ``kind`` limit (its job's ``policy``) passed in the window looked at."""

    run: WatchedRun
    policy: AlertPolicy
    kind: AlertKind


@dataclass(frozen=True, slots=True)
class FiredAlert:
    """An alert on record: ``run_id`` passed its ``limit_seconds`` by ``late_seconds``."""

    run_id: str
    kind: AlertKind
    job_name: str
    logical_date: datetime
    limit_seconds: float
    late_seconds: float
    fired_at: datetime


@dataclass(frozen=True, slots=True)
class UnfiredAlert:
    """An alert on record whose callback has not run to its end: ``alert`` as of now (its
    run's state read again; ``None`` if the run is gone), recorded at ``fired_at``."""

    run_id: str
    kind: AlertKind
    fired_at: datetime
    alert: Alert | None


@dataclass(frozen=True, slots=True)
class AlertSummary:
    """Alerts fired since some instant: how many of each kind, and the newest few."""

    missed: int
    sla_misses: int
    newest: list[FiredAlert]


class AlertStore(Protocol):
    async def alert_candidates(self, since: datetime, now: datetime) -> list[AlertCandidate]:
        """Runs of ticks (``core.alerts.WATCHED_TRIGGERS``) of live, unpaused jobs whose
        start deadline or SLA instant (logical date + limit) lies in ``(since, now]``, each
        with the kind of that limit. Reads index ranges of the logical date, one per
        distinct limit among the jobs, so its cost follows the window, not the history."""

    async def record_alerts(
        self, alerts: Sequence[Alert], now: datetime, *, fence: Fence | None = None
    ) -> list[Alert]:
        """Record ``alerts`` fired at ``now``; return those not on record before (each
        (run, kind) is recorded once, whoever tries). Fenced like every leader write."""

    async def unfired_alerts(self, recorded_before: datetime, limit: int) -> list[UnfiredAlert]:
        """Up to ``limit`` alerts recorded before ``recorded_before`` whose callback is not
        marked done (:meth:`mark_hooks_done`), oldest first."""

    async def mark_hooks_done(
        self, keys: Sequence[tuple[str, AlertKind]], at: datetime, *, fence: Fence | None = None
    ) -> None:
        """Mark the callbacks of the alerts ``(run_id, kind)`` done at ``at`` (those marked
        already keep their instant). Fenced like every leader write."""

    async def recent_alerts(
        self, since: datetime, *, job_name: str | None = None, limit: int = 50
    ) -> AlertSummary:
        """How many alerts of each kind fired since ``since`` (of ``job_name``, or of every
        job) and the newest ``limit`` of them, newest first."""
