"""The task-run state machine table and the run state derived from it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork.core.model import RunState, TaskRunState
from tickwork.core.states import (
    CANCELLABLE_AT_REST,
    DISPATCHABLE,
    OUTCOMES,
    RETRYABLE,
    TERMINAL,
    TRANSITIONS,
    can_transition,
    derive_run_state,
    sources_of,
)

S = TaskRunState


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (S.PENDING, S.SCHEDULED),
        (S.SCHEDULED, S.QUEUED),
        (S.QUEUED, S.RUNNING),
        (S.RUNNING, S.SUCCESS),
        (S.RUNNING, S.UP_FOR_RETRY),
        (S.UP_FOR_RETRY, S.QUEUED),
        (S.RUNNING, S.FAILED),
        (S.FAILED, S.SCHEDULED),
        (S.SCHEDULED, S.SKIPPED),
        (S.QUEUED, S.SCHEDULED),
    ],
)
def test_can_transition_allows_the_lifecycle_steps(src: TaskRunState, dst: TaskRunState) -> None:
    assert can_transition(src, dst)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (S.SUCCESS, S.RUNNING),
        (S.SUCCESS, S.SCHEDULED),
        (S.SKIPPED, S.SCHEDULED),
        (S.PENDING, S.RUNNING),
        (S.SCHEDULED, S.RUNNING),
        (S.RUNNING, S.SCHEDULED),
        (S.RUNNING, S.RUNNING),
    ],
)
def test_can_transition_refuses_skipping_or_leaving_a_final_state(
    src: TaskRunState, dst: TaskRunState
) -> None:
    assert not can_transition(src, dst)


def test_success_and_skipped_are_final_and_every_state_is_reachable_or_initial() -> None:
    assert not [dst for (src, dst) in TRANSITIONS if src in {S.SUCCESS, S.SKIPPED}]
    reachable = {dst for (_, dst) in TRANSITIONS}
    # ``pending`` is also where a retried task with upstreams waits for them again.
    assert set(S) - reachable == set()
    assert {src for (src, dst) in TRANSITIONS if dst == S.PENDING} == {
        S.FAILED,
        S.UPSTREAM_FAILED,
        S.CANCELLED,
    }


def test_an_attempt_outcome_is_a_final_or_retry_state_never_a_release() -> None:
    assert frozenset({S.SUCCESS, S.FAILED, S.UP_FOR_RETRY, S.CANCELLED}) == OUTCOMES
    assert all(can_transition(S.RUNNING, o) for o in OUTCOMES)
    assert S.QUEUED not in OUTCOMES  # running -> queued is a release, not an outcome


def test_every_transition_names_its_event() -> None:
    assert all(event.strip() for event in TRANSITIONS.values())


def test_sources_of_lists_exactly_the_states_leading_to_a_state() -> None:
    assert sources_of(S.RUNNING) == {S.QUEUED}
    assert sources_of(S.QUEUED) == {S.SCHEDULED, S.UP_FOR_RETRY, S.RUNNING}
    assert sources_of(S.CANCELLED) == {
        S.PENDING,
        S.SCHEDULED,
        S.QUEUED,
        S.RUNNING,
        S.UP_FOR_RETRY,
    }
    assert sources_of(S.PENDING) == frozenset({S.FAILED, S.UPSTREAM_FAILED, S.CANCELLED})


def test_named_state_sets_agree_with_the_table() -> None:
    assert all(can_transition(s, S.QUEUED) for s in DISPATCHABLE)
    assert all(can_transition(s, S.CANCELLED) for s in CANCELLABLE_AT_REST)
    assert all(can_transition(s, S.SCHEDULED) for s in RETRYABLE)
    assert RETRYABLE <= TERMINAL
    assert not CANCELLABLE_AT_REST & TERMINAL
    assert S.RUNNING not in CANCELLABLE_AT_REST  # a running process has to be killed first


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], RunState.SCHEDULED),
        ([S.PENDING], RunState.SCHEDULED),
        ([S.SCHEDULED, S.PENDING], RunState.SCHEDULED),
        ([S.QUEUED], RunState.QUEUED),
        ([S.QUEUED, S.SCHEDULED], RunState.QUEUED),
        ([S.RUNNING, S.QUEUED], RunState.RUNNING),
        ([S.UP_FOR_RETRY], RunState.RUNNING),
        ([S.SUCCESS, S.PENDING], RunState.RUNNING),
        ([S.SUCCESS], RunState.SUCCESS),
        ([S.SUCCESS, S.SKIPPED], RunState.SUCCESS),
        ([S.SKIPPED, S.SKIPPED], RunState.SKIPPED),
        ([S.SUCCESS, S.FAILED], RunState.FAILED),
        ([S.UPSTREAM_FAILED, S.CANCELLED], RunState.FAILED),
        ([S.SUCCESS, S.CANCELLED], RunState.CANCELLED),
    ],
)
def test_derive_run_state_follows_the_task_runs(
    states: list[TaskRunState], expected: RunState
) -> None:
    assert derive_run_state(states) is expected


def test_derive_run_state_accepts_any_iterable_once() -> None:
    assert derive_run_state(iter([S.SUCCESS, S.FAILED])) is RunState.FAILED


@given(st.sets(st.sampled_from(TaskRunState)))
def test_a_run_with_a_running_task_run_is_running_whatever_the_others(
    others: set[TaskRunState],
) -> None:
    # The store's claim relies on this to mark runs running without reading siblings.
    assert derive_run_state([TaskRunState.RUNNING, *others]) is RunState.RUNNING


_BEFORE_QUEUED = st.sets(st.sampled_from([TaskRunState.PENDING, TaskRunState.SCHEDULED]))


@given(_BEFORE_QUEUED, st.sets(st.sampled_from(TaskRunState)))
def test_queueing_a_task_run_moves_a_scheduled_run_to_queued_and_leaves_others(
    resting: set[TaskRunState], others: set[TaskRunState]
) -> None:
    # The store's mark_queued relies on this to update runs without reading siblings:
    # a scheduled run becomes queued; a run in any other state keeps its state.
    if derive_run_state([TaskRunState.SCHEDULED, *resting]) is RunState.SCHEDULED:
        assert derive_run_state([TaskRunState.QUEUED, *resting]) is RunState.QUEUED
    before = derive_run_state([TaskRunState.SCHEDULED, *others])
    if before is not RunState.SCHEDULED:
        assert derive_run_state([TaskRunState.QUEUED, *others]) is before
