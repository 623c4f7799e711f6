"""The task-run state machine, as one table. Every other module asks it."""

from __future__ import annotations

from collections.abc import Iterable

from tickwork.core.model import RunState, TaskRunState

S = TaskRunState

#: Every allowed transition, with the event that causes it.
TRANSITIONS: dict[tuple[TaskRunState, TaskRunState], str] = {
    (S.PENDING, S.SCHEDULED): "upstreams done",
    (S.PENDING, S.UPSTREAM_FAILED): "an upstream failed for good",
    (S.PENDING, S.SKIPPED): "branch not taken",
    (S.PENDING, S.CANCELLED): "cancel",
    (S.SCHEDULED, S.QUEUED): "dispatch",
    (S.SCHEDULED, S.CANCELLED): "cancel",
    (S.SCHEDULED, S.SKIPPED): "missed fire, catchup=false",
    (S.QUEUED, S.RUNNING): "claim",
    (S.QUEUED, S.SCHEDULED): "requeue (worker drained or message lost)",
    (S.QUEUED, S.CANCELLED): "cancel",
    (S.RUNNING, S.SUCCESS): "attempt succeeded",
    (S.RUNNING, S.UP_FOR_RETRY): "attempt failed, attempts left",
    (S.RUNNING, S.FAILED): "attempt failed, none left (dead-lettered)",
    (S.RUNNING, S.CANCELLED): "cancel (process killed)",
    (S.RUNNING, S.QUEUED): "release: claimed ahead, never started, worker draining",
    (S.UP_FOR_RETRY, S.QUEUED): "dispatch (backoff elapsed)",
    (S.UP_FOR_RETRY, S.CANCELLED): "cancel",
    (S.FAILED, S.SCHEDULED): "manual retry of a dead letter",
    (S.UPSTREAM_FAILED, S.SCHEDULED): "manual retry",
    (S.CANCELLED, S.SCHEDULED): "manual retry",
    # A retried task with upstreams waits for them again (the trigger rules decide).
    (S.FAILED, S.PENDING): "manual retry, task has upstreams",
    (S.UPSTREAM_FAILED, S.PENDING): "manual retry, task has upstreams",
    (S.CANCELLED, S.PENDING): "manual retry, task has upstreams",
}

TERMINAL: frozenset[TaskRunState] = frozenset(
    {S.SUCCESS, S.FAILED, S.CANCELLED, S.SKIPPED, S.UPSTREAM_FAILED}
)
#: States a dispatcher hands to the broker once ``due_at`` has passed.
DISPATCHABLE: frozenset[TaskRunState] = frozenset({S.SCHEDULED, S.UP_FOR_RETRY})
#: States that a cancel request moves straight to ``cancelled`` (nothing is executing).
CANCELLABLE_AT_REST: frozenset[TaskRunState] = frozenset(
    {S.PENDING, S.SCHEDULED, S.QUEUED, S.UP_FOR_RETRY}
)
#: Where a running attempt can end up when it finishes (``Outcome.state``). Running →
#: queued is also allowed, but as a release of an attempt that never started, not an outcome.
OUTCOMES: frozenset[TaskRunState] = frozenset({S.SUCCESS, S.FAILED, S.UP_FOR_RETRY, S.CANCELLED})
#: States a manual retry accepts.
RETRYABLE: frozenset[TaskRunState] = frozenset({S.FAILED, S.UPSTREAM_FAILED, S.CANCELLED})


def can_transition(src: TaskRunState, dst: TaskRunState) -> bool:
    return (src, dst) in TRANSITIONS


def sources_of(dst: TaskRunState) -> frozenset[TaskRunState]:
    """The states from which ``dst`` may be reached (for conditional updates)."""
    return frozenset(src for (src, to) in TRANSITIONS if to == dst)


def derive_run_state(states: Iterable[TaskRunState]) -> RunState:
    """A run's state follows from its task runs' states."""
    seen = set(states)
    if not seen:
        return RunState.SCHEDULED
    if seen <= TERMINAL:
        if seen & {S.FAILED, S.UPSTREAM_FAILED}:
            return RunState.FAILED
        if S.CANCELLED in seen:
            return RunState.CANCELLED
        if seen == {S.SKIPPED}:
            return RunState.SKIPPED
        return RunState.SUCCESS
    if seen & {S.RUNNING, S.UP_FOR_RETRY} or seen & TERMINAL:
        return RunState.RUNNING
    if S.QUEUED in seen:
        return RunState.QUEUED
    return RunState.SCHEDULED
