"""The Python SDK: typed clients of the tickwork HTTP API, synchronous and asynchronous.

    from tickwork import Client

    with Client("http://127.0.0.1:8080") as tw:
        tw.create_job({
            "name": "hello",
            "schedule": {"kind": "now"},
            "task": {"kind": "python", "target": "mypkg.tasks:hello", "kwargs": {"name": "x"}},
        })
        for run in tw.list_runs(job="hello")["runs"]:
            print(run["id"], run["state"])

``AsyncClient`` has the same methods, each awaited (``async with AsyncClient(...) as tw:``).
Results are the API's JSON as typed dicts; instants are ISO 8601 strings in UTC. Errors the
API reports raise ``ApiError``; a server that cannot be reached raises ``Unreachable``.

Task-queue style: ``tw.enqueue("resize", {"path": p})`` runs the existing job ``resize`` once
more with those params; ``tw.enqueue_many("resize", [{...}, ...])`` up to 5,000 at a time.

Each operation is written once, as a function that describes its request (a ``Call``); the
``operation`` descriptor hands that description to the client's transport, sync or async, so
the two clients cannot drift apart. Modules: ``calls`` (that machinery), ``jobs``, ``runs``,
``admin`` (the operations by concept), ``clients``, ``errors``; the typed dicts live in
``types``. The code users write for the server to run lives here too: ``pytasks``
(``@tickwork.task``), ``workflow`` (``@tickwork.workflow``) and ``definitions`` (YAML and
``module:attr`` job definitions). The clients load on first use, so ``import tickwork`` (which
binds the decorators) loads no HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tickwork.sdk.types import (
    AttemptInfo,
    CallbackInput,
    CallbacksInput,
    Enqueued,
    EnqueuedBatch,
    Fire,
    Fires,
    JobApplied,
    JobInfo,
    JobInput,
    JobPage,
    LogChunk,
    Logs,
    ParamsInput,
    PoolInfo,
    RetryInfo,
    RetryInput,
    RunDetail,
    RunInfo,
    RunPage,
    ScheduleInfo,
    ScheduleInput,
    SecretInfo,
    TaskInfo,
    TaskInput,
    TaskRunInfo,
    TokenInfo,
    TokenSecret,
    TriggerRuleName,
)

if TYPE_CHECKING:
    from tickwork.sdk.calls import API_PREFIX, Call, operation
    from tickwork.sdk.clients import AsyncClient, Client
    from tickwork.sdk.errors import ApiError, ClientError, Unreachable

#: Public name -> the module that defines it, imported on first use.
_LAZY = {
    "API_PREFIX": "tickwork.sdk.calls",
    "Call": "tickwork.sdk.calls",
    "operation": "tickwork.sdk.calls",
    "AsyncClient": "tickwork.sdk.clients",
    "Client": "tickwork.sdk.clients",
    "ApiError": "tickwork.sdk.errors",
    "ClientError": "tickwork.sdk.errors",
    "Unreachable": "tickwork.sdk.errors",
}

__all__ = [
    "API_PREFIX",
    "ApiError",
    "AsyncClient",
    "AttemptInfo",
    "Call",
    "CallbackInput",
    "CallbacksInput",
    "Client",
    "ClientError",
    "Enqueued",
    "EnqueuedBatch",
    "Fire",
    "Fires",
    "JobApplied",
    "JobInfo",
    "JobInput",
    "JobPage",
    "LogChunk",
    "Logs",
    "ParamsInput",
    "PoolInfo",
    "RetryInfo",
    "RetryInput",
    "RunDetail",
    "RunInfo",
    "RunPage",
    "ScheduleInfo",
    "ScheduleInput",
    "SecretInfo",
    "TaskInfo",
    "TaskInput",
    "TaskRunInfo",
    "TokenInfo",
    "TokenSecret",
    "TriggerRuleName",
    "Unreachable",
    "operation",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwork.sdk' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
