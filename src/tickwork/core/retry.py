"""Retry policy: how long to wait before the next attempt, and whether there is one."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from math import inf, isfinite

from tickwork.core.errors import ValidationError
from tickwork.core.model import Outcome, RetryPolicy, TaskRun, TaskRunState

#: The longest wait between attempts; longer ones would overflow ``timedelta`` arithmetic.
MAX_DELAY = 7 * 24 * 3600.0
#: Attempts lost with their worker (killed, frozen, cut off) that are retried beyond the
#: task's own ``max_attempts``: a dead worker is not the task's failure, and with the default
#: policy (one attempt) its runs would otherwise be dead letters although the work may be done.
INFRA_RETRIES = 3


def validate_retry(policy: RetryPolicy, field: str = "retry") -> RetryPolicy:
    max_attempts = policy.max_attempts
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        raise ValidationError(f"{field}.max_attempts", "must be a whole number from 1 to 1000")
    if max_attempts < 1 or max_attempts > 1000:
        raise ValidationError(f"{field}.max_attempts", "must be between 1 and 1000")
    for name in ("initial_delay", "multiplier", "max_delay", "jitter"):
        value = getattr(policy, name)
        # NaN compares false with everything, so it would slip through the range checks below.
        if isinstance(value, bool) or not isinstance(value, int | float) or not isfinite(value):
            raise ValidationError(f"{field}.{name}", "must be a finite number")
    if policy.initial_delay < 0:
        raise ValidationError(f"{field}.initial_delay", "must be zero or more seconds")
    if policy.multiplier < 1:
        raise ValidationError(f"{field}.multiplier", "must be 1 or more")
    if not policy.initial_delay <= policy.max_delay <= MAX_DELAY:
        raise ValidationError(
            f"{field}.max_delay", "must be at least initial_delay and at most 7 days (604800 s)"
        )
    if not 0 <= policy.jitter <= 1:
        raise ValidationError(f"{field}.jitter", "must be a fraction between 0 and 1")
    return policy


def backoff_delay(policy: RetryPolicy, attempt: int, rand: float) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based).

    ``rand`` is a uniform random number in [0, 1) supplied by the caller (the core reads no
    randomness); it spreads the delay over ``[d * (1 - jitter), d * (1 + jitter)]``, capped
    at ``max_delay``.
    """
    exponent = max(attempt - 1, 0)
    # Cap the exponent, and treat an overflowing power as "past the cap": a large attempt
    # count or multiplier must not raise.
    try:
        growth = policy.multiplier ** min(exponent, 64)
    except OverflowError:
        growth = inf
    raw = policy.initial_delay * growth if policy.initial_delay else 0.0
    base = min(raw, policy.max_delay)
    spread = base * policy.jitter * (2 * rand - 1)
    return max(0.0, min(base + spread, policy.max_delay))


def has_attempts_left(policy: RetryPolicy, attempt: int) -> bool:
    return attempt < policy.max_attempts


def failure_outcome(
    task_run: TaskRun,
    *,
    now: datetime,
    rand: float,
    error: str,
    exit_code: int | None = None,
    started_at: datetime | None = None,
    worker_id: str | None = None,
) -> Outcome:
    """What a failed attempt leads to: a retry after backoff, or the dead-letter state."""
    if has_attempts_left(task_run.retry, task_run.attempt):
        delay = backoff_delay(task_run.retry, task_run.attempt, rand)
        return Outcome(
            task_run_id=task_run.id,
            attempt=task_run.attempt,
            state=TaskRunState.UP_FOR_RETRY,
            finished_at=now,
            started_at=started_at,
            retry_at=now + timedelta(seconds=delay),
            error=error,
            exit_code=exit_code,
            worker_id=worker_id,
        )
    return Outcome(
        task_run_id=task_run.id,
        attempt=task_run.attempt,
        state=TaskRunState.FAILED,
        finished_at=now,
        started_at=started_at,
        error=error,
        exit_code=exit_code,
        worker_id=worker_id,
    )


def lost_outcome(
    task_run: TaskRun,
    *,
    now: datetime,
    rand: float,
    error: str,
    started_at: datetime | None = None,
    worker_id: str | None = None,
) -> Outcome:
    """What an attempt lost with its worker leads to: a retry while the task run has used
    fewer than ``max_attempts + INFRA_RETRIES`` attempts (the task's own budget, plus a
    separate one for infrastructure), else the dead-letter state."""
    extended = replace(task_run.retry, max_attempts=task_run.retry.max_attempts + INFRA_RETRIES)
    return failure_outcome(
        replace(task_run, retry=extended),
        now=now,
        rand=rand,
        error=error,
        started_at=started_at,
        worker_id=worker_id,
    )
