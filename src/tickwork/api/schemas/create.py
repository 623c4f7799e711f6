"""Request bodies that create things: JobCreate (one job) and JobBatchCreate (many).

These models check shape only (types, required fields, unknown fields). Meaning (a valid
cron expression, a known zone, an instant in the future, ...) is checked by the core, so
the API, the CLI and the SDK refuse exactly the same things.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict

from tickwork.api.schemas.callbacks import CallbacksIn, callbacks_core
from tickwork.api.schemas.instant import IsoInstant
from tickwork.api.schemas.numbers import Whole
from tickwork.api.schemas.params import ParamsIn, params_core
from tickwork.api.schemas.secret_ref import RefMap, UrlAuth
from tickwork.api.text import Text
from tickwork.app.records import JobSpec
from tickwork.core.alerts import DEFAULT_START_DEADLINE
from tickwork.core.errors import ValidationError
from tickwork.core.model import RetryPolicy, Schedule, ScheduleKind, Task, TaskKind, TriggerRule

DEFAULT_TASK_NAME = "main"
MAX_BATCH = 1000
_TASK_FIELDS = frozenset(
    {
        "kind",
        "name",
        "upstream",
        "timeout",
        "retry",
        "trigger_rule",
        "priority",
        "pool",
        "pool_slots",
        "callbacks",
    }
)
_DEFAULT_RETRY = RetryPolicy()
_T = TypeVar("_T")
_FIRST_TASK = re.compile(r"^(?:jobs\[(\d+)\]\.)?(tasks\[0\])")


class _Input(BaseModel):
    # Strict: `"timeout": "10"` is refused, not read as 10 (instants and enums, which JSON
    # can only spell as text, opt out field by field).
    model_config = ConfigDict(extra="forbid", strict=True)


class ScheduleIn(_Input):
    """When a job runs. ``now``: at once. ``at``: once, at an instant. ``cron``: repeatedly."""

    kind: Literal["now", "at", "cron"] = Field(description="`now`, `at` or `cron`.")
    at: IsoInstant | None = Field(None, description="For `at`: the instant, with an offset.")
    cron: Text | None = Field(
        None, description="For `cron`: a 5-field expression.", examples=["30 2 * * *"]
    )
    timezone: Text = Field("UTC", description="IANA zone the cron expression is read in.")
    start: IsoInstant | None = Field(None, description="For `cron`: no fire before this.")
    end: IsoInstant | None = Field(None, description="For `cron`: no fire after this.")

    def to_core(self) -> Schedule:
        return Schedule(
            kind=ScheduleKind(self.kind),
            at=self.at,
            cron=self.cron,
            timezone=self.timezone,
            start=self.start,
            end=self.end,
        )


class RetryIn(_Input):
    """Retry policy. Unset fields take the defaults shown."""

    max_attempts: Whole | None = Field(
        None, description="Attempts in all, first one included.", examples=[3]
    )
    initial_delay: float | None = Field(
        None,
        description=f"Seconds before the first retry (default {_DEFAULT_RETRY.initial_delay}).",
    )
    multiplier: float | None = Field(
        None, description=f"Growth of the delay per attempt (default {_DEFAULT_RETRY.multiplier})."
    )
    max_delay: float | None = Field(
        None, description="Cap on the delay in seconds (default 300, or initial_delay if larger)."
    )
    jitter: float | None = Field(
        None, description=f"Random spread as a fraction (default {_DEFAULT_RETRY.jitter})."
    )

    def to_core(self) -> RetryPolicy:
        initial = _or(self.initial_delay, _DEFAULT_RETRY.initial_delay)
        return RetryPolicy(
            max_attempts=_or(self.max_attempts, _DEFAULT_RETRY.max_attempts),
            initial_delay=initial,
            multiplier=_or(self.multiplier, _DEFAULT_RETRY.multiplier),
            # A long initial delay alone should not trip the max_delay >= initial_delay rule.
            max_delay=_or(self.max_delay, max(_DEFAULT_RETRY.max_delay, initial)),
            jitter=_or(self.jitter, _DEFAULT_RETRY.jitter),
        )


class _TaskBase(_Input):
    kind: str
    name: Text = Field(DEFAULT_TASK_NAME, description="Unique within the job.")
    upstream: list[Text] = Field(default_factory=list, description="Names of tasks that run first.")
    timeout: float | None = Field(None, description="Seconds; overrides the job's timeout.")
    retry: RetryIn | None = Field(None, description="Overrides the job's retry policy.")
    trigger_rule: Annotated[TriggerRule, Strict(False)] = Field(
        TriggerRule.ALL_SUCCESS, description="When it runs, given its upstreams' states."
    )
    priority: Whole | None = Field(None, description="-100 to 100; overrides the job's.")
    pool: str | None = Field(None, description="A pool (`tickwork pool set`) it takes slots of.")
    pool_slots: Whole = Field(1, description="Slots of `pool` it holds while queued or running.")
    callbacks: CallbacksIn | None = Field(None, description="Hooks; win over the job's.")

    def to_core(self) -> Task:
        config = self.model_dump(exclude=set(_TASK_FIELDS), exclude_unset=True, exclude_none=True)
        return Task(
            name=self.name,
            kind=TaskKind(self.kind),
            config=config,
            upstream=tuple(self.upstream),
            timeout=self.timeout,
            retry=self.retry.to_core() if self.retry else None,
            trigger_rule=self.trigger_rule,
            priority=self.priority,
            pool=self.pool,
            pool_slots=self.pool_slots,
            callbacks=callbacks_core(self.callbacks),
        )


class ShellTaskIn(_TaskBase):
    """Runs a program. ``argv`` is never passed through a shell; ``command`` is, with ``shell``."""

    kind: Literal["shell"]
    argv: list[Text] | None = Field(None, examples=[["pg_dump", "mydb"]])
    command: Text | None = Field(None, description="With `shell: true`: one /bin/sh command line.")
    shell: bool = False
    env: RefMap = Field(default_factory=dict)
    cwd: Text | None = None


class HttpTaskIn(_TaskBase):
    """Calls a URL; a non-2xx answer fails the attempt."""

    kind: Literal["http"]
    method: Text = "GET"
    url: Text = Field(examples=["https://example.org/health"])
    url_auth: UrlAuth = None
    headers: RefMap = Field(default_factory=dict)
    body: str | dict[str, Any] | list[Any] | None = Field(None, description="Text or JSON.")


class PythonTaskIn(_TaskBase):
    """Calls ``module:function`` with ``kwargs``; the function may be sync or async."""

    kind: Literal["python"]
    target: Text = Field(examples=["mypkg.tasks:hello"])
    kwargs: dict[str, Any] = Field(default_factory=dict)


TaskIn = Annotated[ShellTaskIn | HttpTaskIn | PythonTaskIn, Field(discriminator="kind")]


class JobCreate(_Input):
    """A job: a unique name, a schedule, its task or tasks, and its policies.

    Give either ``task`` (one task) or ``tasks``: a workflow, tasks wired as a DAG by their
    ``upstream`` names.
    """

    name: Text = Field(description="Unique among live jobs.", examples=["backup"])
    schedule: ScheduleIn
    task: TaskIn | None = None
    tasks: list[TaskIn] | None = None
    retry: RetryIn | None = None
    timeout: float | None = Field(None, description="Seconds an attempt may run.")
    queue: Text = Field("default", description="Routing label of the workers that run it.")
    priority: Whole = Field(0, description="Higher runs first.")
    catchup: bool = Field(False, description="On restart or resume, run every missed cron fire.")
    jitter: float | None = Field(
        None,
        description=(
            "Cron only: seconds a fire's run may start after its logical date, the same offset "
            "every time for the same fire, always before the next fire (null: the fleet's "
            "cron_spread; 0: on the dot)."
        ),
    )
    tags: list[Text] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    max_active_runs: Whole | None = Field(
        None, description="Runs that may be unfinished at once (null: no limit)."
    )
    depends_on_past: bool = Field(
        False, description="A task waits for itself in the previous run to succeed."
    )
    callbacks: CallbacksIn | None = Field(None, description="Hooks for every task of the job.")
    params: ParamsIn | None = Field(
        None, description="Params trigger/enqueue may pass, and who may (none by default)."
    )
    start_deadline: float | None = Field(
        None,
        description="Seconds after its logical date a tick's run must have started by, else "
        f"`on_missed` fires (default {DEFAULT_START_DEADLINE:g}).",
        examples=[600],
    )
    sla: float | None = Field(
        None,
        description="Seconds after its logical date a tick's run must have finished by, else "
        "`on_sla_miss` fires (default: no SLA).",
        examples=[3600],
    )

    def to_spec(self) -> JobSpec:
        return JobSpec(
            name=self.name,
            schedule=self.schedule.to_core(),
            tasks=self._core_tasks(),
            retry=self.retry.to_core() if self.retry else RetryPolicy(),
            timeout=self.timeout,
            queue=self.queue,
            priority=self.priority,
            catchup=self.catchup,
            jitter=self.jitter,
            tags=tuple(self.tags),
            metadata=self.metadata,
            max_active_runs=self.max_active_runs,
            depends_on_past=self.depends_on_past,
            callbacks=callbacks_core(self.callbacks),
            params=params_core(self.params),
            start_deadline=self.start_deadline,
            sla=self.sla,
        )

    def _core_tasks(self) -> tuple[Task, ...]:
        if (self.task is None) == (self.tasks is None):
            raise ValidationError("task", "give exactly one of `task` or `tasks`")
        if self.task is not None:
            return (self.task.to_core(),)
        assert self.tasks is not None
        return tuple(t.to_core() for t in self.tasks)


class JobBatchCreate(_Input):
    """Many jobs created in one transaction: all of them, or none."""

    jobs: list[JobCreate] = Field(min_length=1, max_length=MAX_BATCH)


class TriggerIn(_Input):
    """A manual run. ``logical_date`` defaults to now; one run per logical date.

    ``params`` must be declared by the job's params contract (else 422); python tasks get
    them as extra keyword arguments and shell tasks as JSON in the ``TICKWORK_PARAMS``
    environment variable; http tasks ignore them.
    """

    logical_date: IsoInstant | None = None
    params: dict[str, Any] | None = None


class _WithTask(Protocol):
    """A body that may give one task inline (JobCreate, JobUpdate)."""

    @property
    def task(self) -> object: ...


def _or(value: _T | None, default: _T) -> _T:
    return default if value is None else value


@contextmanager
def user_errors(bodies: Sequence[_WithTask]) -> Iterator[None]:
    """Name the fields of core errors as the request spelled them.

    The core sees a job's tasks as ``tasks[i].config.x``; a request that sent one ``task``
    with its fields inline reads that as ``task.x``.
    """
    try:
        yield
    except ValidationError as e:
        raise ValidationError(_user_field(e.field, bodies), e.reason) from None


def _user_field(field: str, bodies: Sequence[_WithTask]) -> str:
    field = field.replace(".config.", ".").removesuffix(".config")
    match = _FIRST_TASK.match(field)
    if match is None:
        return field
    index = int(match.group(1) or 0)
    if index < len(bodies) and bodies[index].task is not None:
        return field[: match.start(2)] + "task" + field[match.end(2) :]
    return field
