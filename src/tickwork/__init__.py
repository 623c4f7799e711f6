"""tickwork: a distributed, highly available job scheduler.

``from tickwork import Client, AsyncClient`` gives the SDK; ``@tickwork.task`` and
``tickwork.job_from`` build python-task jobs from functions. Its names load on first use, so
``import tickwork`` stays cheap (no HTTP client, server or database library).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tickwork.pytasks import NotImportable, TaskPolicy, job_from, task
    from tickwork.sdk import ApiError, AsyncClient, Client, ClientError, Unreachable

#: Public name -> the module that defines it.
_LAZY = {
    "ApiError": "tickwork.sdk",
    "AsyncClient": "tickwork.sdk",
    "Client": "tickwork.sdk",
    "ClientError": "tickwork.sdk",
    "Unreachable": "tickwork.sdk",
    "NotImportable": "tickwork.pytasks",
    "TaskPolicy": "tickwork.pytasks",
    "job_from": "tickwork.pytasks",
    "task": "tickwork.pytasks",
}

__all__ = [
    "ApiError",
    "AsyncClient",
    "Client",
    "ClientError",
    "NotImportable",
    "TaskPolicy",
    "Unreachable",
    "__version__",
    "job_from",
    "task",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwork' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
