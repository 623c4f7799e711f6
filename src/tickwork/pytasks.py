"""Python tasks by decorator: ``@tickwork.task`` records a function's import path and policies,
``tickwork.job_from`` turns it into a job body for ``Client.create_job``.

    @tickwork.task(queue="reports", retries=2, timeout=60)
    def nightly_report(day: str) -> None: ...

    tw.create_job(tickwork.job_from(nightly_report, name="report", schedule="0 3 * * *"))

Workers import the function by its ``module:function`` path, so only functions defined at the
top level of an importable module are accepted: not lambdas, nested functions, methods, or
functions of a script run as ``__main__``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from tickwork.sdk import JobInput, ScheduleInput, TaskInput

F = TypeVar("F", bound=Callable[..., Any])

_ATTR = "__tickwork_task__"


@dataclass(frozen=True)
class TaskPolicy:
    """What ``@task`` recorded: the function's ``module:function`` path and its policies."""

    target: str
    queue: str | None = None
    retries: int | None = None
    timeout: float | None = None


class NotImportable(ValueError):
    """A function a worker could not import by ``module:function``."""


@overload
def task(fn: F, /) -> F: ...
@overload
def task(
    *, queue: str | None = None, retries: int | None = None, timeout: float | None = None
) -> Callable[[F], F]: ...
def task(
    fn: F | None = None,
    /,
    *,
    queue: str | None = None,
    retries: int | None = None,
    timeout: float | None = None,
) -> F | Callable[[F], F]:
    """Mark a module-level function as a tickwork python task. ``retries`` is how many times a
    failed attempt is tried again; ``timeout`` is in seconds. The function is returned as is."""

    def mark(f: F) -> F:
        setattr(f, _ATTR, TaskPolicy(target_of(f), queue, retries, timeout))
        return f

    return mark(fn) if fn is not None else mark


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
    """The policy ``@task`` recorded on ``fn``, or a bare one for an undecorated function."""
    recorded = getattr(fn, _ATTR, None)
    policy = recorded if isinstance(recorded, TaskPolicy) else TaskPolicy(target_of(fn))
    module = sys.modules.get(policy.target.partition(":")[0])
    if module is not None and getattr(module, fn.__name__, None) is not fn:
        raise NotImportable(f"{policy.target} does not name this function in its module")
    return policy


def job_from(
    fn: Callable[..., Any],
    *,
    name: str,
    schedule: ScheduleInput | str = "now",
    kwargs: dict[str, Any] | None = None,
    tz: str = "UTC",
) -> JobInput:
    """The body of ``Client.create_job`` for a job that runs ``fn(**kwargs)``. ``schedule`` is
    ``"now"``, a cron expression (in ``tz``), or a full schedule dict."""
    policy = policy_of(fn)
    task: TaskInput = {"kind": "python", "target": policy.target, "kwargs": kwargs or {}}
    if policy.retries is not None:
        task["retry"] = {"max_attempts": policy.retries + 1}
    if policy.timeout is not None:
        task["timeout"] = policy.timeout
    job: JobInput = {"name": name, "schedule": _schedule(schedule, tz), "task": task}
    if policy.queue is not None:
        job["queue"] = policy.queue
    return job


def _schedule(schedule: ScheduleInput | str, tz: str) -> ScheduleInput:
    if not isinstance(schedule, str):
        return schedule
    if schedule == "now":
        return {"kind": "now"}
    return {"kind": "cron", "cron": schedule, "timezone": tz}
