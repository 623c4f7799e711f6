"""tickwork: a distributed, highly available job scheduler.

``from tickwork import Client, AsyncClient`` gives the SDK. Its names load on first use, so
``import tickwork`` stays cheap (no HTTP client, server or database library).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

__all__ = ["ApiError", "AsyncClient", "Client", "ClientError", "Unreachable", "__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwork' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
