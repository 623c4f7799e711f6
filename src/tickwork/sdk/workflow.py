"""Workflows in Python: ``@workflow`` on a function whose body calls ``@task`` functions.

    from tickwork import task, workflow

    @task
    def extract_users() -> list[dict[str, Any]]: ...

    @task(retries=2, pool="db")
    def join(users: list[dict[str, Any]], orders: list[dict[str, Any]]) -> ...: ...

    @workflow(schedule="0 2 * * *", catchup=False)
    def etl() -> None:
        joined = join(extract_users(), extract_orders())
        load(aggregate(joined))

    etl.spec()  # the same dict a YAML definition gives; no task ran

While the body is being built, a call to a task records a task node and returns a
:class:`TaskResult` placeholder; passing it to another task records the edge (``upstream``) and
the argument (``{"$result": "extract_users"}`` in ``kwargs``). Anywhere else a ``@task``
function is the plain function: workers import it by its ``module:function`` path and call it,
and tests can call it directly. Other arguments must be JSON values. ``task`` is
``tickwork.task`` (``tickwork.sdk.pytasks``), re-exported here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tickwork.core.refs import RESULT_REF
from tickwork.sdk.pytasks import TaskFunction, recording, task

if TYPE_CHECKING:
    from tickwork.core.workflow_spec import WorkflowSpec

__all__ = ["TaskFunction", "TaskResult", "Workflow", "task", "workflow"]


class TaskResult:
    """The stand-in for a task's result while a workflow is built: it only records edges."""

    __slots__ = ("task",)

    def __init__(self, task: str) -> None:
        self.task = task

    def __repr__(self) -> str:
        return f"TaskResult({self.task!r})"

    def _refuse(self) -> TypeError:
        return TypeError(
            f"the result of {self.task!r} does not exist while the workflow is built; "
            "pass it whole to another @task, which receives the real value when it runs"
        )

    def __bool__(self) -> bool:
        raise self._refuse()

    def __iter__(self) -> Iterator[Any]:
        raise self._refuse()

    def __getitem__(self, key: object) -> Any:
        raise self._refuse()


class Workflow:
    """A ``@workflow`` function: :meth:`spec` builds its definition without running a task."""

    def __init__(self, fn: Callable[[], object], head: Mapping[str, Any]) -> None:
        if inspect.signature(fn).parameters:
            raise TypeError(f"@workflow function {fn.__qualname__} must take no arguments")
        if inspect.iscoroutinefunction(fn):
            raise TypeError(f"@workflow function {fn.__qualname__} must be a plain def")
        self.fn = fn
        self.head = dict(head)
        self.name: str = self.head["name"]
        self.__doc__ = fn.__doc__

    def spec(self) -> dict[str, Any]:
        """The definition as plain data, the same a YAML or JSON file gives."""
        builder = _Builder(self.head.get("queue", "default"))
        with recording(builder):
            self.fn()
        return {**self.head, "tasks": builder.tasks}

    def parse(self) -> WorkflowSpec:
        """The definition, validated (see ``tickwork.core.workflow_spec.parse_workflow``)."""
        # Imported on use: ``import tickwork`` loads this module, and the validators pull in
        # the cron libraries, which defining tasks and workflows never needs.
        from tickwork.core.workflow_spec import parse_workflow

        return parse_workflow(self.spec())

    def __repr__(self) -> str:
        return f"<workflow {self.name}>"


def workflow(
    *,
    schedule: str | Mapping[str, Any],
    catchup: bool = False,
    name: str | None = None,
    timeout: float | None = None,
    retry: Mapping[str, Any] | None = None,
    queue: str | None = None,
    priority: int | None = None,
    tags: list[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    max_active_runs: int | None = None,
    depends_on_past: bool | None = None,
    callbacks: Mapping[str, Mapping[str, Any]] | None = None,
    start_deadline: float | None = None,
    sla: float | None = None,
) -> Callable[[Callable[[], object]], Workflow]:
    """Make a function a workflow definition. ``schedule`` is ``"now"``, a cron expression
    (UTC) or a schedule object such as ``{"kind": "cron", "cron": "0 2 * * *", "timezone":
    "Europe/Berlin"}``; the other fields are the job's, as in a YAML definition
    (``start_deadline`` and ``sla`` in seconds: the run alerts ``on_missed``/``on_sla_miss``)."""
    optional = {
        "timeout": timeout,
        "retry": None if retry is None else dict(retry),
        "queue": queue,
        "priority": priority,
        "tags": None if tags is None else list(tags),
        "metadata": None if metadata is None else dict(metadata),
        "max_active_runs": max_active_runs,
        "depends_on_past": depends_on_past,
        "callbacks": None if callbacks is None else {k: dict(v) for k, v in callbacks.items()},
        "start_deadline": start_deadline,
        "sla": sla,
    }

    def wrap(fn: Callable[[], object]) -> Workflow:
        head: dict[str, Any] = {
            "name": name or fn.__name__,
            "schedule": schedule if isinstance(schedule, str) else dict(schedule),
            "catchup": catchup,
        }
        head.update({k: v for k, v in optional.items() if v is not None})
        return Workflow(fn, head)

    return wrap


class _Builder:
    """The tasks a workflow body has called so far, as spec dicts."""

    def __init__(self, queue: str) -> None:
        self.tasks: list[dict[str, Any]] = []
        self._names: set[str] = set()
        self._queue = queue

    def add(
        self, fn: TaskFunction[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> TaskResult:
        self._check_queue(fn)
        name = self._unique(fn.name)
        upstream: list[str] = []
        arguments = {
            key: self._encode(value, upstream) for key, value in _bind(fn, args, kwargs).items()
        }
        node: dict[str, Any] = {"name": name, "kind": "python", "target": fn.target}
        if upstream:
            node["upstream"] = upstream
        if arguments:
            node["kwargs"] = arguments
        node.update(fn.policy.task_fields())
        self.tasks.append(node)
        return TaskResult(name)

    def _check_queue(self, fn: TaskFunction[Any, Any]) -> None:
        queue = fn.policy.queue
        if queue is not None and queue != self._queue:
            raise ValueError(
                f"task {fn.name} asks for queue {queue!r}, but a workflow's tasks run on its "
                f"queue ({self._queue!r}); pass @workflow(queue={queue!r})"
            )

    def _unique(self, name: str) -> str:
        # Calling one task twice gives two nodes, as Airflow does: extract, extract__2, ...
        unique, n = name, 1
        while unique in self._names:
            n += 1
            unique = f"{name}__{n}"
        self._names.add(unique)
        return unique

    def _encode(self, value: object, upstream: list[str]) -> Any:
        if isinstance(value, TaskResult):
            if value.task not in upstream:
                upstream.append(value.task)
            return {RESULT_REF: value.task}
        if isinstance(value, list | tuple):
            return [self._encode(item, upstream) for item in value]
        if isinstance(value, Mapping):
            return {key: self._encode(item, upstream) for key, item in value.items()}
        return value


def _bind(
    fn: TaskFunction[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments by parameter name: tasks receive keyword arguments only."""
    signature = inspect.signature(fn.fn)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"task {fn.name}: {exc}") from None
    named: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        kind = signature.parameters[key].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"task {fn.name}: pass *{key} values by name; tasks take kwargs")
        if kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"task {fn.name}: {key} is positional-only; tasks take kwargs")
        if kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        else:
            named[key] = value
    return named
