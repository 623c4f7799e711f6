"""What an attempt's ``RunResult`` becomes in the store: ``outcome_of``."""

from __future__ import annotations

from datetime import timedelta

from tests.fixtures.task_runs import LOGICAL_DATE, make_task_run
from tickwork.core.model import Outcome, TaskKind, TaskRunState
from tickwork.ports import RunResult
from tickwork.worker.outcomes import outcome_of

STARTED = LOGICAL_DATE + timedelta(seconds=1)
NOW = STARTED + timedelta(seconds=2)


def _outcome(result: RunResult, *, max_result_bytes: int = 1024) -> Outcome:
    task_run = make_task_run(TaskKind.PYTHON, {"target": "m:f"}, attempt=2)
    return outcome_of(
        task_run, result, started=STARTED, now=NOW, rand=lambda: 0.5, worker_id="w-1",
        max_result_bytes=max_result_bytes,
    )  # fmt: skip


def test_success_carries_the_result_text_exit_code_and_times() -> None:
    outcome = _outcome(RunResult(ok=True, result={"n": 1}, exit_code=0))
    assert outcome.state is TaskRunState.SUCCESS
    assert (outcome.task_run_id, outcome.attempt, outcome.worker_id) == ("tr-1", 2, "w-1")
    assert (outcome.started_at, outcome.finished_at) == (STARTED, NOW)
    assert outcome.result == '{"n":1}'
    assert outcome.exit_code == 0
    assert outcome.error is None and outcome.retry_at is None


def test_success_without_a_result_stores_none() -> None:
    outcome = _outcome(RunResult(ok=True))
    assert outcome.state is TaskRunState.SUCCESS
    assert outcome.result is None and outcome.exit_code is None


def test_a_result_over_the_limit_fails_the_attempt_and_keeps_no_result() -> None:
    outcome = _outcome(RunResult(ok=True, result="x" * 100), max_result_bytes=10)
    assert outcome.state is not TaskRunState.SUCCESS
    assert outcome.result is None
    assert outcome.error is not None and "over the 10-byte limit" in outcome.error


def test_a_result_that_is_not_json_succeeds_without_a_result() -> None:
    outcome = _outcome(RunResult(ok=True, result=object()))
    assert outcome.state is TaskRunState.SUCCESS
    assert outcome.result is None
