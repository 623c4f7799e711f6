"""Run alerts in the pure core: the start deadline (``on_missed``), the SLA (``on_sla_miss``),
once per (run, kind), and the validation of both policies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickwork.core.alerts import (
    AlertKind,
    AlertPolicy,
    WatchedRun,
    alert_policy,
    due_alerts,
)
from tickwork.core.errors import ValidationError
from tickwork.core.ledger import DEFAULT_GRACE
from tickwork.core.model import RunState, RunTrigger

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def run(state: RunState = RunState.QUEUED, **kw: datetime) -> WatchedRun:
    return WatchedRun("r1", "nightly", T0, state, kw.get("started_at"), kw.get("finished_at"))


def kinds(runs: list[WatchedRun], policy: AlertPolicy, now: datetime) -> list[AlertKind]:
    return [a.kind for a in due_alerts(runs, policy, now)]


def test_a_run_not_started_past_its_start_deadline_is_missed_once() -> None:
    policy = AlertPolicy(start_deadline=2 * MIN)
    assert kinds([run()], policy, T0 + 2 * MIN) == []  # on the deadline: still on time
    [alert] = due_alerts([run()], policy, T0 + 3 * MIN)
    assert (alert.kind, alert.limit, alert.late_by) == (AlertKind.MISSED, 2 * MIN, MIN)
    fired = {("r1", AlertKind.MISSED)}
    assert due_alerts([run()], policy, T0 + 10 * MIN, fired=fired) == []


def test_without_a_start_deadline_the_ledger_grace_applies() -> None:
    assert kinds([run()], AlertPolicy(), T0 + DEFAULT_GRACE) == []
    assert kinds([run()], AlertPolicy(), T0 + DEFAULT_GRACE + MIN) == [AlertKind.MISSED]


def test_a_run_started_within_its_deadline_is_never_missed_one_started_after_it_is() -> None:
    in_time, late = T0 + MIN, T0 + 10 * MIN
    policy = AlertPolicy(start_deadline=MIN)
    running = run(RunState.RUNNING, started_at=in_time)
    done = run(RunState.SUCCESS, started_at=in_time, finished_at=late)
    assert kinds([running, done], policy, T0 + 20 * MIN) == []
    [alert] = due_alerts([run(RunState.SUCCESS, started_at=late, finished_at=late)], policy, T0)
    assert (alert.kind, alert.late_by) == (AlertKind.MISSED, 9 * MIN)


def test_a_tick_skipped_after_downtime_is_missed_a_cancelled_or_skipped_run_is_not() -> None:
    skipped = WatchedRun("r1", "nightly", T0, RunState.SKIPPED, trigger=RunTrigger.MISSED)
    assert kinds([skipped], AlertPolicy(), T0 + DEFAULT_GRACE + MIN) == [AlertKind.MISSED]
    assert kinds([skipped], AlertPolicy(), T0 + DEFAULT_GRACE) == []
    quiet = [run(RunState.CANCELLED), run(RunState.SKIPPED)]
    assert kinds(quiet, AlertPolicy(), T0 + 60 * MIN) == []


def test_a_policy_over_a_year_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        alert_policy(sla=1e300)
    assert caught.value.field == "sla" and "a year" in caught.value.reason


def test_a_run_over_its_sla_fires_once_whether_running_or_finished_late() -> None:
    policy = AlertPolicy(sla=30 * MIN)
    running = run(RunState.RUNNING, started_at=T0)
    assert kinds([running], policy, T0 + 30 * MIN) == []
    assert kinds([running], policy, T0 + 31 * MIN) == [AlertKind.SLA_MISS]
    finished_late = run(RunState.FAILED, started_at=T0, finished_at=T0 + 40 * MIN)
    [alert] = due_alerts([finished_late], policy, T0 + 60 * MIN)
    assert alert.late_by == 10 * MIN  # counted to its end, not to now
    fired = {("r1", AlertKind.SLA_MISS)}
    assert due_alerts([running], policy, T0 + 60 * MIN, fired=fired) == []


def test_on_time_runs_and_skipped_runs_fire_nothing() -> None:
    policy = AlertPolicy(start_deadline=MIN, sla=30 * MIN)
    on_time = run(RunState.SUCCESS, started_at=T0, finished_at=T0 + 29 * MIN)
    skipped = run(RunState.SKIPPED)
    assert kinds([on_time, skipped], policy, T0 + 24 * 60 * MIN) == []


def test_a_run_never_started_misses_both_its_deadline_and_its_sla() -> None:
    policy = AlertPolicy(start_deadline=MIN, sla=5 * MIN)
    assert kinds([run()], policy, T0 + 6 * MIN) == [AlertKind.MISSED, AlertKind.SLA_MISS]
    fired = {("r1", AlertKind.MISSED)}
    assert [a.kind for a in due_alerts([run()], policy, T0 + 6 * MIN, fired=fired)] == [
        AlertKind.SLA_MISS
    ]


def test_policies_parse_from_seconds() -> None:
    assert alert_policy(90, 3600.5) == AlertPolicy(timedelta(seconds=90), timedelta(seconds=3600.5))
    assert alert_policy() == AlertPolicy()


@pytest.mark.parametrize(
    ("field", "value"),
    [("start_deadline", 0), ("start_deadline", -5), ("sla", float("inf")), ("sla", "1h")],
)
def test_policies_must_be_positive_seconds_and_errors_name_the_field(
    field: str, value: object
) -> None:
    with pytest.raises(ValidationError) as caught:
        alert_policy(**{field: value})
    assert caught.value.field == field
    assert "seconds" in caught.value.reason


def test_true_is_not_a_duration() -> None:
    with pytest.raises(ValidationError, match="sla"):
        alert_policy(sla=True)
