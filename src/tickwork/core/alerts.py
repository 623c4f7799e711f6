"""Run alerts in the pure core: which runs have missed their start deadline or their SLA.

A job may set two optional policies, both durations counted from a run's logical date:

- ``start_deadline``: the run must have started by then, or it is *missed* (``on_missed``);
  unset, the ledger's ``DEFAULT_GRACE`` applies, so a late tick counts the same everywhere;
- ``sla``: the run must have finished by then, or it breached its SLA (``on_sla_miss``).

Each alert is due once per (run, kind): the caller records what fired (a unique key) and
passes it back as ``fired``, so a restart or a failover does not fire it again. Nothing here
reads a clock or a store: ``now`` and the runs are given.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from tickwork.core.errors import ValidationError
from tickwork.core.ledger import DEFAULT_GRACE
from tickwork.core.model import RunState

#: Runs in these states are over: an SLA counts their ``finished_at``, not ``now``.
_OVER = frozenset({RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED})
#: A run not started in these states may still start: the start deadline watches them.
_WAITING = frozenset({RunState.SCHEDULED, RunState.QUEUED})


class AlertKind(StrEnum):
    """What an alert is about; its value is the callback event it fires."""

    MISSED = "on_missed"
    SLA_MISS = "on_sla_miss"


@dataclass(frozen=True, slots=True)
class AlertPolicy:
    """A job's alert policies; ``None``: the default start deadline, and no SLA."""

    start_deadline: timedelta | None = None
    sla: timedelta | None = None

    @property
    def deadline(self) -> timedelta:
        return DEFAULT_GRACE if self.start_deadline is None else self.start_deadline


@dataclass(frozen=True, slots=True)
class WatchedRun:
    """What the alert check needs of a run."""

    run_id: str
    job_name: str
    logical_date: datetime
    state: RunState
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert due: ``run`` passed the ``limit`` of ``kind`` (``late_by`` past it at ``now``)."""

    kind: AlertKind
    run: WatchedRun
    limit: timedelta
    late_by: timedelta


def alert_policy(start_deadline: object = None, sla: object = None) -> AlertPolicy:
    """Parse the two policies from seconds (int or float; ``None``: unset), raising
    ``ValidationError`` that names the field unless each is a positive finite number."""
    return AlertPolicy(
        start_deadline=_seconds("start_deadline", start_deadline),
        sla=_seconds("sla", sla),
    )


def due_alerts(
    runs: Iterable[WatchedRun],
    policy: AlertPolicy,
    now: datetime,
    *,
    fired: Collection[tuple[str, AlertKind]] = (),
) -> list[Alert]:
    """The alerts ``runs`` (of one job, with ``policy``) owe at ``now`` and have not fired
    (``fired`` holds ``(run_id, kind)`` pairs already recorded), in the order of ``runs``."""
    due: list[Alert] = []
    for run in runs:
        for alert in _alerts_of(run, policy, now):
            if (run.run_id, alert.kind) not in fired:
                due.append(alert)
    return due


def _alerts_of(run: WatchedRun, policy: AlertPolicy, now: datetime) -> list[Alert]:
    found: list[Alert] = []
    waited = now - run.logical_date
    if run.state in _WAITING and run.started_at is None and waited > policy.deadline:
        found.append(Alert(AlertKind.MISSED, run, policy.deadline, waited - policy.deadline))
    if policy.sla is not None and run.state is not RunState.SKIPPED:
        end = run.finished_at if run.state in _OVER and run.finished_at is not None else now
        took = end - run.logical_date
        if took > policy.sla:
            found.append(Alert(AlertKind.SLA_MISS, run, policy.sla, took - policy.sla))
    return found


def _seconds(name: str, value: object) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(name, f"must be a number of seconds, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValidationError(name, f"must be a positive number of seconds, not {value!r}")
    return timedelta(seconds=value)
