"""What a callback is told about the attempt that fired it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum
from typing import Any

from tickwork.core.errors import TickworkError
from tickwork.core.model import CallbackEvent, Outcome, TaskRun, TaskRunState
from tickwork.security.masking import mask_text

_EVENTS = {
    TaskRunState.SUCCESS: CallbackEvent.ON_SUCCESS,
    TaskRunState.FAILED: CallbackEvent.ON_FAILURE,
    TaskRunState.UP_FOR_RETRY: CallbackEvent.ON_RETRY,
}


class CallbackFailed(TickworkError):
    """A callback did not do its job; the message says why (it goes to logs, never further)."""


def event_for(state: TaskRunState) -> CallbackEvent | None:
    """The event an attempt ending in ``state`` fires: ``success`` → ``on_success``,
    ``failed`` (for good) → ``on_failure``, ``up_for_retry`` → ``on_retry``; None for any
    other state (a cancelled attempt fires nothing)."""
    return _EVENTS.get(state)


@dataclass(frozen=True, slots=True)
class CallbackContext:
    """One finished attempt, as a callback receives it (python) or as the JSON body of a
    webhook (:meth:`to_json`). ``log_tail`` is the end of the attempt's output (empty when
    the reaper failed it: its worker was lost with the output)."""

    event: CallbackEvent
    job_name: str
    run_id: str
    logical_date: datetime
    task_name: str
    task_run_id: str
    attempt: int
    state: TaskRunState
    error: str | None
    exit_code: int | None
    started_at: datetime | None
    finished_at: datetime
    log_tail: str
    worker_id: str | None

    @classmethod
    def of(
        cls, event: CallbackEvent, task_run: TaskRun, outcome: Outcome, log_tail: str
    ) -> CallbackContext:
        """The context of ``outcome``, the attempt of ``task_run`` that fires ``event``."""
        return cls(
            event=event,
            job_name=task_run.job_name,
            run_id=task_run.run_id,
            logical_date=task_run.logical_date,
            task_name=task_run.task_name,
            task_run_id=task_run.id,
            attempt=outcome.attempt,
            state=outcome.state,
            error=outcome.error,
            exit_code=outcome.exit_code,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            log_tail=log_tail,
            worker_id=outcome.worker_id,
        )

    def to_json(self) -> dict[str, Any]:
        """Every field as a JSON value: instants as ISO 8601 text, enums as their values."""
        payload = {f.name: _json_value(getattr(self, f.name)) for f in fields(self)}
        # The payload leaves tickwork: what looks secret in the error or output is masked.
        for key in ("error", "log_tail"):
            text = payload[key]
            if isinstance(text, str):
                payload[key] = mask_text(text)
        return payload


def _json_value(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    return value
