"""What an ``on_missed`` / ``on_sla_miss`` callback is told about the run it fired for."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from tickwork.core.alerts import Alert
from tickwork.core.model import CallbackEvent, RunState


@dataclass(frozen=True, slots=True)
class AlertContext:
    """One alert, as a python callback receives it or as the JSON body of a webhook
    (:meth:`to_json`): ``run_id`` of ``job_name`` for ``logical_date`` passed its limit
    (``limit_seconds`` from the logical date: the start deadline for ``on_missed``, the SLA
    for ``on_sla_miss``) by ``late_seconds`` when the leader saw it (``fired_at``)."""

    event: CallbackEvent
    job_name: str
    run_id: str
    logical_date: datetime
    state: RunState
    limit_seconds: float
    late_seconds: float
    started_at: datetime | None
    finished_at: datetime | None
    fired_at: datetime

    @classmethod
    def of(cls, alert: Alert, fired_at: datetime) -> AlertContext:
        run = alert.run
        return cls(
            event=CallbackEvent(alert.kind.value),
            job_name=run.job_name,
            run_id=run.run_id,
            logical_date=run.logical_date,
            state=run.state,
            limit_seconds=alert.limit.total_seconds(),
            late_seconds=alert.late_by.total_seconds(),
            started_at=run.started_at,
            finished_at=run.finished_at,
            fired_at=fired_at,
        )

    def to_json(self) -> dict[str, Any]:
        """Every field as a JSON value: instants as ISO 8601 text, enums as their values."""
        return {f.name: _json_value(getattr(self, f.name)) for f in fields(self)}


def _json_value(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, CallbackEvent | RunState):
        return value.value
    return value
