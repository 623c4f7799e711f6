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
from tickwork.core.model import Job, RunState, RunTrigger

#: Runs in these states are over: an SLA counts their ``finished_at``, not ``now``.
_OVER = frozenset({RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED})
#: Seconds a tick's run may take to start when its job sets no ``start_deadline``.
DEFAULT_START_DEADLINE = DEFAULT_GRACE.total_seconds()
#: A run not started in these states may still start: the start deadline watches them.
_WAITING = frozenset({RunState.SCHEDULED, RunState.QUEUED})
#: The longest either policy may be: a year (and no ``timedelta`` overflow on absurd input).
MAX_SECONDS = 366 * 24 * 3600
#: Runs of ticks (what a schedule promised): the only ones alerts watch. A backfill, a manual
#: trigger of a past date or an enqueued run is late by design, and would only raise noise.
WATCHED_TRIGGERS = frozenset({RunTrigger.SCHEDULE, RunTrigger.CATCHUP, RunTrigger.MISSED})


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
    trigger: RunTrigger = RunTrigger.SCHEDULE


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


def policy_of(job: Job) -> AlertPolicy:
    """The alert policy a stored (validated) job sets."""
    return alert_policy(job.start_deadline, job.sla)


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
    late = _late_start(run, policy, now)
    if late is not None:
        found.append(Alert(AlertKind.MISSED, run, policy.deadline, late))
    if policy.sla is not None and run.state is not RunState.SKIPPED:
        end = run.finished_at if run.state in _OVER and run.finished_at is not None else now
        took = end - run.logical_date
        if took > policy.sla:
            found.append(Alert(AlertKind.SLA_MISS, run, policy.sla, took - policy.sla))
    return found


def _late_start(run: WatchedRun, policy: AlertPolicy, now: datetime) -> timedelta | None:
    """How far past its start deadline ``run`` started (or is, at ``now``, still waiting);
    None if it started in time. A tick recorded as skipped after downtime (trigger
    ``missed``) never started: it is late from its deadline on."""
    never = run.state is RunState.SKIPPED and run.trigger is RunTrigger.MISSED
    if run.started_at is not None:
        start = run.started_at
    elif run.state in _WAITING or never:
        start = now
    else:
        return None  # cancelled or skipped before it started: nobody waits for it
    late = start - run.logical_date - policy.deadline
    return late if late > timedelta(0) else None


def _seconds(name: str, value: object) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(name, f"must be a number of seconds, not {value!r}")
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise ValidationError(
            name,
            f"must be a positive number of seconds up to {MAX_SECONDS:,} (a year), not {value!r}",
        )
    return timedelta(seconds=value)
