"""Retry policy: validation, backoff with cap and jitter, and the outcome of a failure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickwork.core.errors import ValidationError
from tickwork.core.model import RetryPolicy, TaskKind, TaskRun, TaskRunState
from tickwork.core.retry import (
    backoff_delay,
    failure_outcome,
    has_attempts_left,
    lost_outcome,
    validate_retry,
)

NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)
NO_JITTER = RetryPolicy(max_attempts=10, initial_delay=1, multiplier=2, max_delay=60, jitter=0)


def task_run(policy: RetryPolicy, attempt: int) -> TaskRun:
    return TaskRun(
        id="tr1",
        run_id="r1",
        job_id="j1",
        job_name="nightly",
        task_name="main",
        kind=TaskKind.SHELL,
        config={"argv": ["false"]},
        state=TaskRunState.RUNNING,
        attempt=attempt,
        retry=policy,
        due_at=NOW,
        logical_date=NOW,
    )


@pytest.mark.parametrize(("attempt", "delay"), [(1, 1), (2, 2), (3, 4), (6, 32), (7, 60), (50, 60)])
def test_backoff_grows_exponentially_up_to_the_cap(attempt: int, delay: float) -> None:
    assert backoff_delay(NO_JITTER, attempt, 0.5) == delay


def test_backoff_jitter_spreads_within_the_fraction_and_never_past_the_cap() -> None:
    policy = RetryPolicy(max_attempts=5, initial_delay=10, multiplier=2, max_delay=25, jitter=0.5)
    assert backoff_delay(policy, 1, 0.0) == 5.0
    assert backoff_delay(policy, 1, 0.999999) == pytest.approx(15.0, abs=1e-4)
    assert backoff_delay(policy, 3, 0.999999) == 25.0  # 20 * 1.5 would pass max_delay
    assert backoff_delay(policy, 3, 0.0) == 12.5


def test_backoff_does_not_overflow_for_huge_multipliers_or_attempts() -> None:
    # Found while writing these tests: 1e10 ** 49 raised OverflowError before the cap applied.
    policy = RetryPolicy(max_attempts=1000, initial_delay=1, multiplier=1e10, max_delay=600)
    assert backoff_delay(policy, 50, 0.5) == 600
    assert backoff_delay(NO_JITTER, 10_000, 0.5) == 60
    zero = RetryPolicy(max_attempts=1000, initial_delay=0, multiplier=1e10, max_delay=600)
    assert backoff_delay(zero, 50, 0.5) == 0


def test_has_attempts_left_counts_the_attempt_being_made() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [has_attempts_left(policy, n) for n in (1, 2, 3)] == [True, True, False]


def test_failure_with_attempts_left_schedules_a_retry_after_backoff() -> None:
    outcome = failure_outcome(
        task_run(NO_JITTER, 3), now=NOW, rand=0.5, error="exit 1", exit_code=1, worker_id="w1"
    )
    assert outcome.state is TaskRunState.UP_FOR_RETRY
    assert outcome.retry_at == NOW + timedelta(seconds=4)
    assert (outcome.attempt, outcome.error, outcome.exit_code) == (3, "exit 1", 1)
    assert outcome.worker_id == "w1"


def test_failure_of_the_last_attempt_dead_letters() -> None:
    outcome = failure_outcome(
        task_run(RetryPolicy(max_attempts=2), 2), now=NOW, rand=0.5, error="x"
    )
    assert outcome.state is TaskRunState.FAILED
    assert outcome.retry_at is None


@pytest.mark.parametrize(("attempt", "state"), [
    (1, TaskRunState.UP_FOR_RETRY),
    (3, TaskRunState.UP_FOR_RETRY),
    (4, TaskRunState.FAILED),
])  # fmt: skip
def test_an_attempt_lost_with_its_worker_is_retried_from_a_budget_of_three(
    attempt: int, state: TaskRunState
) -> None:
    # One attempt by policy (the default): a lost attempt still gets 3 more.
    outcome = lost_outcome(task_run(RetryPolicy(), attempt), now=NOW, rand=0.5, error="lost")
    assert outcome.state is state


def test_failure_with_the_longest_allowed_delay_still_computes_a_retry_time() -> None:
    policy = validate_retry(
        RetryPolicy(max_attempts=9, initial_delay=1, multiplier=1e6, max_delay=7 * 86400)
    )
    outcome = failure_outcome(task_run(policy, 8), now=NOW, rand=0.99, error="x")
    assert outcome.retry_at == NOW + timedelta(days=7)


def test_validate_retry_accepts_the_defaults_and_returns_the_policy() -> None:
    assert validate_retry(RetryPolicy()) == RetryPolicy()


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (RetryPolicy(max_attempts=0), "retry.max_attempts"),
        (RetryPolicy(max_attempts=1001), "retry.max_attempts"),
        (RetryPolicy(max_attempts=2.5), "retry.max_attempts"),  # type: ignore[arg-type]
        (RetryPolicy(initial_delay=-1), "retry.initial_delay"),
        (RetryPolicy(initial_delay=float("nan")), "retry.initial_delay"),
        (RetryPolicy(multiplier=0.5), "retry.multiplier"),
        (RetryPolicy(multiplier=float("inf")), "retry.multiplier"),
        (RetryPolicy(initial_delay=10, max_delay=5), "retry.max_delay"),
        (RetryPolicy(max_delay=8 * 86400), "retry.max_delay"),
        (RetryPolicy(max_delay=float("nan")), "retry.max_delay"),
        (RetryPolicy(jitter=1.5), "retry.jitter"),
        (RetryPolicy(jitter=float("nan")), "retry.jitter"),
        (RetryPolicy(jitter="0.1"), "retry.jitter"),  # type: ignore[arg-type]
    ],
)
def test_validate_retry_refuses_naming_the_field(policy: RetryPolicy, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_retry(policy)
    assert caught.value.field == field
    assert caught.value.reason


def test_validate_retry_uses_the_given_field_prefix() -> None:
    with pytest.raises(ValidationError) as caught:
        validate_retry(RetryPolicy(max_attempts=0), "tasks[0].retry")
    assert caught.value.field == "tasks[0].retry.max_attempts"
