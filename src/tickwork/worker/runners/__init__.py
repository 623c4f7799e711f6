"""Task runners, one per task kind, and the function that builds the set a worker uses."""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx2

from tickwork.core.model import TaskKind
from tickwork.ports import Runner
from tickwork.runtime.targets import TargetError
from tickwork.worker.runners.http import HttpGuard, HttpRunner, RequestRefused, allow_all
from tickwork.worker.runners.python import PythonRunner
from tickwork.worker.runners.python_process import ProcessPythonRunner
from tickwork.worker.runners.shell import ShellRunner

__all__ = [
    "HttpGuard",
    "HttpRunner",
    "ProcessPythonRunner",
    "PythonRunner",
    "RequestRefused",
    "ShellRunner",
    "TargetError",
    "build_runners",
    "close_runners",
]


def build_runners(
    *,
    http_guard: HttpGuard = allow_all,
    http_client: httpx2.AsyncClient | None = None,
    http_timeout: float = 30.0,
    base_env: Mapping[str, str] | None = None,
    capture_output: bool = True,
    python_threads: int = 32,
    python_isolation: str | None = None,
) -> dict[TaskKind, Runner]:
    """The runners of every task kind, ready for a worker pool.

    ``capture_output`` lets the python runner install the ``sys.stdout`` / ``sys.stderr``
    proxies that route a task's prints to its log (once per process; they pass output
    through when no task runs). ``python_threads`` bounds the python functions that run at
    once. ``python_isolation`` (default: ``TICKWORK_PYTHON_ISOLATION``, else ``process``):
    ``process`` runs python tasks in task processes that timeout and cancel really stop;
    ``thread`` runs them inside the worker (cheaper, but a blocking task stalls the worker and
    a sync one cannot be stopped). Close the result with :func:`close_runners`.
    """
    isolation = python_isolation or os.environ.get("TICKWORK_PYTHON_ISOLATION") or "process"
    python: Runner
    if isolation == "process":
        python = ProcessPythonRunner(max_processes=python_threads)
    elif isolation == "thread":
        python = PythonRunner(capture_output=capture_output, max_threads=python_threads)
    else:
        raise ValueError(f"TICKWORK_PYTHON_ISOLATION must be process or thread, not {isolation!r}")
    return {
        TaskKind.SHELL: ShellRunner(base_env=base_env),
        TaskKind.HTTP: HttpRunner(
            client=http_client, guard=http_guard, default_timeout=http_timeout
        ),
        TaskKind.PYTHON: python,
    }


async def close_runners(runners: Mapping[TaskKind, Runner]) -> None:
    """Release what the runners hold: the http client, the python runner's threads."""
    for runner in runners.values():
        if isinstance(runner, HttpRunner | PythonRunner | ProcessPythonRunner):
            await runner.aclose()
