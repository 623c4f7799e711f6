"""tickwork: a distributed, highly available job scheduler.

``from tickwork import Client, AsyncClient`` gives the SDK; ``@tickwork.task`` and
``tickwork.job_from`` build python-task jobs from functions, and ``@tickwork.workflow`` wires
``@tickwork.task`` calls into a DAG (``tickwork.branch`` picks a branch). Its names load on
first use, so ``import tickwork`` stays cheap (no HTTP client, server or database library).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded at once (they need nothing beyond the standard library), and the decorator must be
# bound here: `tickwork.workflow` is the function, though a module of that name exists too.
from tickwork.sdk.pytasks import NotImportable, TaskFunction, TaskPolicy, branch, job_from, task
from tickwork.sdk.workflow import Workflow, workflow
from tickwork.taskcontext import TaskContext, current_task

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tickwork.sdk import ApiError, AsyncClient, Client, ClientError, Unreachable

#: Public name -> the module that defines it.
_LAZY = {
    "ApiError": "tickwork.sdk",
    "AsyncClient": "tickwork.sdk",
    "Client": "tickwork.sdk",
    "ClientError": "tickwork.sdk",
    "Unreachable": "tickwork.sdk",
}

__all__ = [
    "ApiError",
    "AsyncClient",
    "Client",
    "ClientError",
    "NotImportable",
    "TaskContext",
    "TaskFunction",
    "TaskPolicy",
    "Unreachable",
    "Workflow",
    "__version__",
    "branch",
    "current_task",
    "job_from",
    "task",
    "workflow",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwork' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
