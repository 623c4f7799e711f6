"""Python tasks by decorator: ``@tickwork.task`` marks a module-level function as a task.

    @tickwork.task(queue="reports", retries=2, timeout=60, pool="db", priority=5)
    def nightly_report(day: str) -> dict[str, int]: ...

    tw.create_job(tickwork.job_from(nightly_report, name="report", schedule="0 3 * * *"))

The same decorated function is a node of a workflow when a ``@tickwork.workflow`` body calls
it (see ``tickwork.sdk.workflow``): there a call records the task and returns a placeholder for
its result instead of running it. Anywhere else it is the plain function, which is how
workers call it, by its ``module:function`` path. So only functions defined at the top level
of an importable module are accepted: not lambdas, nested functions, methods, or functions of
a script run as ``__main__``.

A task that returns ``tickwork.branch("a", "b")`` chooses which of its direct downstreams run;
the others are skipped.
"""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    overload,
)

from tickwork.core.refs import BRANCH_KEY

if TYPE_CHECKING:
    from tickwork.sdk.types import JobInput, ParamsInput, ScheduleInput, TaskInput

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class TaskPolicy:
    """What ``@task`` recorded: the function's ``module:function`` path and its policies."""

    target: str
    queue: str | None = None
    retries: int | None = None
    timeout: float | None = None
    pool: str | None = None
    pool_slots: int | None = None
    priority: int | None = None
    trigger_rule: str | None = None
    name: str | None = None
    callbacks: Mapping[str, Mapping[str, Any]] | None = None

    def task_fields(self) -> dict[str, Any]:
        """The fields of a task definition this policy sets (``retry``, ``pool``, ...)."""
        fields: dict[str, Any] = {
            "timeout": self.timeout,
            "pool": self.pool,
            "pool_slots": self.pool_slots,
            "priority": self.priority,
            "trigger_rule": self.trigger_rule,
        }
        if self.retries is not None:
            fields["retry"] = {"max_attempts": self.retries + 1}
        if self.callbacks is not None:
            fields["callbacks"] = {event: dict(hook) for event, hook in self.callbacks.items()}
        return {key: value for key, value in fields.items() if value is not None}


class NotImportable(TypeError, ValueError):
    """A function a worker could not import by ``module:function``."""


class _Recorder(Protocol):
    """What a ``@workflow`` body's calls go to while it is being built."""

    def add(
        self, fn: TaskFunction[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> object: ...


_BUILDING: ContextVar[_Recorder | None] = ContextVar("tickwork_workflow_build", default=None)


@contextmanager
def recording(recorder: _Recorder) -> Iterator[None]:
    """While inside, calls of ``@task`` functions go to ``recorder`` instead of running."""
    if _BUILDING.get() is not None:
        raise RuntimeError("a workflow cannot be built inside another workflow's body")
    token = _BUILDING.set(recorder)
    try:
        yield
    finally:
        _BUILDING.reset(token)


class TaskFunction(Generic[P, R]):
    """A ``@task`` function. Inside a ``@workflow`` body a call records a task and returns a
    placeholder (typed as the function's result, so the body type-checks); anywhere else it
    calls the function."""

    def __init__(self, fn: Callable[P, R], policy: TaskPolicy) -> None:
        self.fn = fn
        self.policy = policy
        self.target = policy.target
        self.name: str = policy.name or fn.__name__
        functools.update_wrapper(self, fn)
        # Look like a function to ``inspect`` (its "function-like" check), so a worker's
        # ``inspect.iscoroutinefunction`` still sees an async task as async; Python 3.11 has
        # no ``inspect.markcoroutinefunction``.
        for attr in ("__code__", "__defaults__", "__kwdefaults__"):
            setattr(self, attr, getattr(fn, attr, None))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        recorder = _BUILDING.get()
        if recorder is None:
            return self.fn(*args, **kwargs)
        return cast(R, recorder.add(self, args, kwargs))

    def __repr__(self) -> str:
        return f"<task {self.target}>"


@overload
def task(fn: Callable[P, R], /) -> TaskFunction[P, R]: ...
@overload
def task(
    *,
    queue: str | None = None,
    retries: int | None = None,
    timeout: float | None = None,
    pool: str | None = None,
    pool_slots: int | None = None,
    priority: int | None = None,
    trigger_rule: str | None = None,
    name: str | None = None,
    callbacks: Mapping[str, Mapping[str, Any]] | None = None,
) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...
def task(
    fn: Callable[P, R] | None = None,
    /,
    **options: Any,
) -> TaskFunction[P, R] | Callable[[Callable[P, R]], TaskFunction[P, R]]:
    """Mark a module-level function as a tickwork python task. ``retries``: how many times a
    failed attempt is tried again; ``timeout``: seconds; ``pool``/``pool_slots``: the pool
    slots it holds while queued or running; ``priority``: -100 to 100, higher first;
    ``trigger_rule`` (in a workflow): when it runs given its upstreams; ``name``: the node's
    name (default: the function's); ``callbacks``: hooks by event. ``queue`` is the job's
    queue for ``job_from``; in a workflow, tasks run on the workflow's queue."""

    def wrap(f: Callable[P, R]) -> TaskFunction[P, R]:
        return TaskFunction(f, TaskPolicy(target_of(f), **options))

    return wrap(fn) if fn is not None else wrap


def branch(*names: str) -> dict[str, list[str]]:
    """The result of a branch task: follow only these direct downstreams; the task's other
    direct downstreams are skipped. ``return tickwork.branch("full_load")``."""
    if not all(isinstance(name, str) and name for name in names):
        raise TypeError("branch() takes the names of direct downstream tasks, as strings")
    return {BRANCH_KEY: list(names)}


def target_of(fn: Callable[..., Any]) -> str:
    """``module:function`` for a function a worker can import, or ``NotImportable``."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    if name == "<lambda>":
        raise NotImportable(
            "a lambda has no import path; define the task with `def` at module level"
        )
    if "." in name or not isinstance(module, str):
        raise NotImportable(
            f"{name} is not a module-level function; workers import tasks by module:function"
        )
    if module == "__main__":
        raise NotImportable(
            f"{name} is defined in __main__, which workers cannot import; move it into a module"
        )
    return f"{module}:{name}"


def policy_of(fn: Callable[..., Any]) -> TaskPolicy:
    """The policy ``@task`` recorded on ``fn``, or a bare one for an undecorated function.
    ``NotImportable`` if the module does not hold ``fn`` under its name."""
    policy = fn.policy if isinstance(fn, TaskFunction) else TaskPolicy(target_of(fn))
    module_name, _, attr = policy.target.partition(":")
    module = sys.modules.get(module_name)
    if module is not None:
        found = getattr(module, attr, None)
        if found is not fn and getattr(found, "fn", None) is not getattr(fn, "fn", fn):
            raise NotImportable(f"{policy.target} does not name this function in its module")
    return policy


def job_from(
    fn: Callable[..., Any],
    *,
    name: str,
    schedule: ScheduleInput | str = "now",
    kwargs: dict[str, Any] | None = None,
    tz: str = "UTC",
    run_scope: Literal["write", "admin"] | None = None,
) -> JobInput:
    """The body of ``Client.create_job`` for a job that runs ``fn(**kwargs)``. ``schedule`` is
    ``"now"``, a cron expression (in ``tz``), or a full schedule dict.

    The function's other parameters become the job's declared params (typed from their
    annotations, required when they have no default), so ``enqueue``/``trigger`` may pass
    them; ``run_scope`` says who may (default: ``admin``, as for any python job)."""
    policy = policy_of(fn)
    fields = {k: v for k, v in policy.task_fields().items() if k != "trigger_rule"}
    body = {"kind": "python", "target": policy.target, "kwargs": kwargs or {}, **fields}
    job: JobInput = {
        "name": name,
        "schedule": _schedule(schedule, tz),
        "task": cast("TaskInput", body),
    }
    contract = params_of(fn, set(kwargs or {}), run_scope)
    if contract.get("properties") or contract.get("scope"):
        job["params"] = contract
    if policy.queue is not None:
        job["queue"] = policy.queue
    return job


_JSON_TYPES: dict[object, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def params_of(
    fn: Callable[..., Any], stored: set[str], scope: Literal["write", "admin"] | None = None
) -> ParamsInput:
    """The params contract of a python job running ``fn``: its keyword-passable parameters
    that ``stored`` kwargs do not fix."""
    inner = getattr(fn, "fn", fn)
    try:
        hints = typing.get_type_hints(inner)
    except Exception:  # an annotation that cannot be resolved: leave the types open
        hints = {}
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for p in inspect.signature(inner).parameters.values():
        if p.name in stored or p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        kind = _JSON_TYPES.get(typing.get_origin(hints.get(p.name)) or hints.get(p.name))
        properties[p.name] = {"type": kind} if kind else {}
        if p.default is p.empty:
            required.append(p.name)
    contract: ParamsInput = {"properties": properties, "required": required}
    if scope is not None:
        contract["scope"] = scope
    return contract


def _schedule(schedule: ScheduleInput | str, tz: str) -> ScheduleInput:
    if not isinstance(schedule, str):
        return schedule
    if schedule == "now":
        return {"kind": "now"}
    return {"kind": "cron", "cron": schedule, "timezone": tz}
