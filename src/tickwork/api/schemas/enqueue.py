"""Enqueue bodies and answers: runs of an existing job with per-run params (task queue)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tickwork.api.schemas.instant import IsoInstant
from tickwork.api.schemas.numbers import Whole
from tickwork.app.enqueue import MAX_ENQUEUE_BATCH, Enqueued, EnqueueItem
from tickwork.core.errors import ValidationError

#: The longest ``delay`` accepted, in seconds (one year).
MAX_DELAY = 366 * 24 * 3600.0


class EnqueueIn(BaseModel):
    """One run of the job. ``params`` reach python tasks as extra keyword arguments and shell
    tasks as JSON in ``TICKWORK_PARAMS``, as with trigger; http tasks ignore them.
    ``priority`` (-100..100) applies to every task of the run (default: as the job says).
    ``at`` (an instant) or ``delay`` (seconds from now), not both, make the run wait; by
    default it is queued at once."""

    # "not both" said in the schema too, so that clients and checkers see it.
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"not": {"required": ["at", "delay"]}}
    )

    params: dict[str, Any] | None = None
    priority: Whole | None = Field(None, ge=-100, le=100)
    at: IsoInstant | None = None
    delay: float | None = Field(None, ge=0, le=MAX_DELAY)

    def to_item(self, now: datetime, where: str = "") -> EnqueueItem:
        at = self.at
        if self.delay is not None:
            if at is not None:
                raise ValidationError(f"{where}delay", "give either at or delay, not both")
            at = now + timedelta(seconds=self.delay)
        return EnqueueItem(params=self.params, priority=self.priority, at=at)


class EnqueueBatchIn(BaseModel):
    """Up to 5,000 runs of the job in one transaction: all of them, or none."""

    model_config = ConfigDict(extra="forbid", strict=True)

    items: list[EnqueueIn] = Field(min_length=1, max_length=MAX_ENQUEUE_BATCH)

    def to_items(self, now: datetime) -> list[EnqueueItem]:
        return [item.to_item(now, f"items[{i}].") for i, item in enumerate(self.items)]


class EnqueuedRead(BaseModel):
    """An enqueued run: its id and its task runs' ids (in the job's task order)."""

    run_id: str
    task_run_ids: list[str]

    @staticmethod
    def plain(done: list[Enqueued]) -> dict[str, Any]:
        """The answer as plain JSON values, in this schema's shape."""
        return {"run_id": done[0].run_id, "task_run_ids": list(done[0].task_run_ids)}


class EnqueuedBatchRead(BaseModel):
    """The enqueued runs' ids, in the order of the items."""

    run_ids: list[str]

    @classmethod
    def of(cls, done: list[Enqueued]) -> EnqueuedBatchRead:
        return cls(run_ids=[e.run_id for e in done])
