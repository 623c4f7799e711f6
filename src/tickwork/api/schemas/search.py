"""Responses of the search side that are not plain records: the dead-letter list."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from tickwork.api.schemas.read import TaskRunRead
from tickwork.ports import DeadLetterPage


class DeadLetterRead(TaskRunRead):
    """A task run that failed its last attempt. Replay it with ``POST /runs/{run_id}/retry``."""

    run_id: str
    job_id: str
    job_name: str
    logical_date: datetime


class DeadLetterPageRead(BaseModel):
    """Dead letters, newest first; pass ``next_cursor`` as ``cursor`` for the next page."""

    task_runs: list[DeadLetterRead]
    next_cursor: str | None

    @classmethod
    def of(cls, page: DeadLetterPage) -> DeadLetterPageRead:
        items = [DeadLetterRead.model_validate(tr) for tr in page.task_runs]
        return cls(task_runs=items, next_cursor=page.next_cursor)
