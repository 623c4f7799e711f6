"""What the services take and return besides core records: job specs and pages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.core.model import Callbacks, Job, LogChunk, RetryPolicy, RunState, Schedule, Task
from tickwork.core.params import NO_PARAMS, ParamsContract

#: Run states after which nothing more happens to a run (until a manual retry).
FINISHED_RUN_STATES: frozenset[RunState] = frozenset(
    {RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED}
)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a user asks for when creating a job: a Job without identity or bookkeeping."""

    name: str
    schedule: Schedule
    tasks: tuple[Task, ...]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float | None = None
    queue: str = "default"
    priority: int = 0
    catchup: bool = False
    jitter: float | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    max_active_runs: int | None = None
    depends_on_past: bool = False
    callbacks: Callbacks = field(default_factory=dict)
    params: ParamsContract = NO_PARAMS
    start_deadline: float | None = None  # seconds (core.alerts); None: the default
    sla: float | None = None  # seconds; None: no SLA


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of jobs ordered by name; pass ``next_after`` back to get the next page."""

    jobs: list[Job]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class Upcoming:
    """A job's next fires, in UTC, and when each one's run becomes due (``dues[i]`` is
    ``fires[i]`` moved by the job's jitter; equal without one)."""

    job: Job
    fires: list[datetime]
    dues: list[datetime]


@dataclass(frozen=True, slots=True)
class LogPage:
    """Log chunks of one task run after an offset, and where to continue from."""

    run_id: str
    task_run_id: str
    chunks: list[LogChunk]
    next_after_seq: int
    run_state: RunState

    @property
    def finished(self) -> bool:
        return self.run_state in FINISHED_RUN_STATES
