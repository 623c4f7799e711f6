"""What a runner's ``RunResult`` means for the store: the ``Outcome`` of an attempt.

Pure: ``now`` and ``rand`` (the retry delay's jitter) are given. A result that is not JSON is
not passed downstream; one too large for ``max_result_bytes`` fails the attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tickwork.core.model import Outcome, TaskRun, TaskRunState
from tickwork.core.results import MAX_RESULT_BYTES, ResultTooLarge, encode_result
from tickwork.core.retry import failure_outcome
from tickwork.ports import RunResult


def outcome_of(
    task_run: TaskRun,
    result: RunResult,
    *,
    started: datetime,
    now: datetime,
    rand: Callable[[], float],
    worker_id: str,
    max_result_bytes: int = MAX_RESULT_BYTES,
) -> Outcome:
    """The outcome of ``task_run``'s attempt that started at ``started`` and ended ``now``."""
    encoded = None
    if result.ok:
        result, encoded = _encoded(result, max_result_bytes)
    if result.ok:
        return finished(
            task_run, TaskRunState.SUCCESS, started=started, now=now, worker_id=worker_id,
            result=encoded, exit_code=result.exit_code,
        )  # fmt: skip
    if result.cancelled and not task_run.cancel_requested:
        # Interrupted by our own shutdown, not by a user: give it back without judgement.
        return finished(
            task_run, TaskRunState.UP_FOR_RETRY, started=started, now=now, worker_id=worker_id,
            error="interrupted by worker shutdown",
        )  # fmt: skip
    if result.cancelled:
        return finished(
            task_run, TaskRunState.CANCELLED, started=started, now=now, worker_id=worker_id,
            error="cancelled",
        )  # fmt: skip
    return failure_outcome(
        task_run,
        now=now,
        rand=rand(),
        error=result.error or ("timed out" if result.timed_out else "failed"),
        exit_code=result.exit_code,
        started_at=started,
        worker_id=worker_id,
    )


def _encoded(result: RunResult, max_result_bytes: int) -> tuple[RunResult, str | None]:
    """A successful result with its JSON text, or a failed one when it is too large."""
    try:
        return result, encode_result(result.result, max_result_bytes)
    except ResultTooLarge as exc:
        return RunResult(ok=False, error=str(exc)), None
    except (TypeError, ValueError):  # not JSON: logged by the runner, not passed on
        return result, None


def finished(
    task_run: TaskRun,
    state: TaskRunState,
    *,
    started: datetime,
    now: datetime,
    worker_id: str,
    error: str | None = None,
    result: str | None = None,
    exit_code: int | None = None,
) -> Outcome:
    """The outcome of an attempt that ended in ``state`` (retried at once if up for retry).
    Built in one go: ``dataclasses.replace`` of a frozen outcome cost as much again per job."""
    return Outcome(
        task_run_id=task_run.id,
        attempt=task_run.attempt,
        state=state,
        finished_at=now,
        started_at=started,
        retry_at=now if state is TaskRunState.UP_FOR_RETRY else None,
        error=error,
        exit_code=exit_code,
        worker_id=worker_id,
        result=result,
    )
