"""Importing ``module.path:function`` targets: python tasks and python callbacks share this."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from tickwork.core.errors import TickworkError


class TargetError(TickworkError):
    """A ``module:function`` target that cannot be imported or called."""


def import_from_cwd() -> None:
    """Let targets be imported from the directory the process was started in, as ``python
    -m`` does (a console script's own directory is on ``sys.path`` instead). Workers call
    this at start, so ``mypkg.tasks:fn`` works from a project's root without PYTHONPATH."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def resolve_target(target: str) -> Callable[..., Any]:
    """Import ``module.path:attr.path`` and return the callable; raise ``TargetError``."""
    module_name, _, attr_path = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"cannot import {target}: {exc}") from exc
    except Exception as exc:  # the module itself raised while being imported
        raise TargetError(f"cannot import {target}: {type(exc).__name__}: {exc}") from exc
    for name in attr_path.split("."):
        try:
            obj = getattr(obj, name)
        except AttributeError as exc:
            raise TargetError(f"cannot import {target}: {exc}") from exc
    if not callable(obj):
        raise TargetError(f"cannot import {target}: {attr_path} is not callable")
    return obj  # type: ignore[no-any-return]
