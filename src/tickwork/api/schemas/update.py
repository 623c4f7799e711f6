"""``JobUpdate``: the body of ``PATCH /jobs/{name}``. Only the fields sent are changed.

Shape is checked here; meaning by the core (``validate_job``), exactly as on create.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tickwork.api.schemas.callbacks import CallbacksIn
from tickwork.api.schemas.create import RetryIn, ScheduleIn, TaskIn, _Input
from tickwork.api.schemas.numbers import Whole
from tickwork.api.schemas.params import ParamsIn
from tickwork.api.text import Text
from tickwork.core.errors import ValidationError

#: Fields that may be sent as ``null`` to clear them; the others need a value.
_NULLABLE = frozenset({"timeout", "max_active_runs", "start_deadline", "sla", "jitter"})
#: Fields whose value is taken as sent.
_PLAIN = frozenset(
    {
        "timeout",
        "queue",
        "priority",
        "catchup",
        "jitter",
        "metadata",
        "max_active_runs",
        "depends_on_past",
        "start_deadline",
        "sla",
    }
)


class JobUpdate(_Input):
    """Changes to a job, for its future runs. Runs already created keep their tasks.

    Send only what changes. ``task`` or ``tasks`` replaces all tasks; ``retry`` and
    ``callbacks`` replace the whole policy (unset fields take the defaults; ``callbacks: {}``
    removes every hook). A new schedule is planned from now.
    """

    schedule: ScheduleIn | None = None
    task: TaskIn | None = None
    tasks: list[TaskIn] | None = None
    retry: RetryIn | None = None
    timeout: float | None = Field(None, description="Seconds an attempt may run; null: none.")
    queue: Text | None = None
    priority: Whole | None = None
    catchup: bool | None = None
    jitter: float | None = Field(None, description="Cron only; null: the fleet's cron_spread.")
    tags: list[Text] | None = None
    metadata: dict[str, Any] | None = None
    max_active_runs: Whole | None = Field(None, description="null: no limit.")
    depends_on_past: bool | None = None
    callbacks: CallbacksIn | None = None
    params: ParamsIn | None = Field(None, description="Replaces the whole params contract.")
    start_deadline: float | None = Field(
        None, description="Seconds a tick's run may take to start; null: the default."
    )
    sla: float | None = Field(None, description="Seconds a tick's run may take; null: none.")

    def to_changes(self) -> dict[str, Any]:
        """The fields sent, as core values keyed by ``Job`` field name."""
        sent = self.model_fields_set
        for name in sorted(sent - _NULLABLE):
            if getattr(self, name) is None:
                raise ValidationError(name, "may not be null; leave it out to keep it")
        if {"task", "tasks"} <= sent:
            raise ValidationError("task", "give at most one of `task` or `tasks`")
        changes: dict[str, Any] = {name: getattr(self, name) for name in sent & _PLAIN}
        if self.schedule is not None:
            changes["schedule"] = self.schedule.to_core()
        if self.task is not None:
            changes["tasks"] = (self.task.to_core(),)
        if self.tasks is not None:
            changes["tasks"] = tuple(t.to_core() for t in self.tasks)
        if self.retry is not None:
            changes["retry"] = self.retry.to_core()
        if self.tags is not None:
            changes["tags"] = tuple(self.tags)
        if self.callbacks is not None:
            changes["callbacks"] = self.callbacks.to_core()
        if self.params is not None:
            changes["params"] = self.params.to_core()
        return changes
