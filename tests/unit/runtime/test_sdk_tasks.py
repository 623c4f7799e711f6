"""``@tickwork.task`` and ``tickwork.job_from``: import paths, refusals, and a job made from a
decorated function created through the API and run by the python runner."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest

import tickwork
from tests.fixtures import decorated
from tests.fixtures.sinks import MemorySink
from tests.fixtures.task_runs import make_task_run
from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import TaskKind
from tickwork.ports import Scope
from tickwork.sdk import AsyncClient
from tickwork.store import open_store
from tickwork.worker import capture
from tickwork.worker.runners.python import PythonRunner


@pytest.fixture
async def client(sqlite_url: str) -> AsyncIterator[AsyncClient]:
    store = await open_store(sqlite_url)
    transport = httpx2.ASGITransport(app=create_app(Services(store, MemoryBroker())))
    admin = await TokenService(store, utc_now).create("sdk", Scope.ADMIN)
    try:
        async with AsyncClient("http://t.test", token=admin.secret, transport=transport) as tw:
            yield tw
    finally:
        await store.close()


def test_task_records_the_import_path_and_policies() -> None:
    assert decorated.report.policy == tickwork.TaskPolicy(
        "tests.fixtures.decorated:report", "reports", 2, 30
    )
    assert decorated.report("d1") == {"day": "d1"}  # called outside a workflow: the function
    assert decorated.guarded.policy == tickwork.TaskPolicy(
        "tests.fixtures.decorated:guarded",
        pool="db",
        pool_slots=2,
        priority=7,
        callbacks={"on_failure": {"kind": "http", "url": "https://hooks.example.org/x"}},
    )


def test_job_from_carries_pool_priority_and_callbacks() -> None:
    job = tickwork.job_from(decorated.guarded, name="g")
    assert job["task"] == {
        "kind": "python",
        "target": "tests.fixtures.decorated:guarded",
        "kwargs": {},
        "pool": "db",
        "pool_slots": 2,
        "priority": 7,
        "callbacks": {"on_failure": {"kind": "http", "url": "https://hooks.example.org/x"}},
    }
    assert "queue" not in job


def test_branch_names_the_downstreams_to_follow() -> None:
    assert tickwork.branch("full_load", "audit") == {"$branch": ["full_load", "audit"]}
    assert tickwork.branch() == {"$branch": []}
    with pytest.raises(TypeError, match="names of direct downstream tasks"):
        tickwork.branch("")


def test_job_from_builds_the_python_task_body() -> None:
    job = tickwork.job_from(decorated.report, name="r", schedule="0 3 * * *", kwargs={"day": "x"})
    assert job == {
        "name": "r",
        "schedule": {"kind": "cron", "cron": "0 3 * * *", "timezone": "UTC"},
        "task": {
            "kind": "python",
            "target": "tests.fixtures.decorated:report",
            "kwargs": {"day": "x"},
            "retry": {"max_attempts": 3},
            "timeout": 30,
        },
        "queue": "reports",
    }  # no params: `day`, the one parameter, is a stored kwarg
    bare = tickwork.job_from(decorated.plain, name="p")
    assert bare == {
        "name": "p",
        "schedule": {"kind": "now"},
        "task": {"kind": "python", "target": "tests.fixtures.decorated:plain", "kwargs": {}},
    }


def _nested() -> Callable[[], None]:
    def inner() -> None:
        return None

    return inner


def _in_main() -> Callable[[], None]:
    def f() -> None:
        return None

    f.__module__, f.__qualname__ = "__main__", "f"
    return f


class _Holder:
    def method(self) -> None:
        return None


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda: None, "lambda"),
        (_nested(), "not a module-level function"),
        (_Holder.method, "not a module-level function"),
        (_in_main(), "__main__"),
    ],
)
def test_task_refuses_functions_workers_cannot_import(fn: Callable[..., Any], words: str) -> None:
    with pytest.raises(tickwork.NotImportable, match=words):
        tickwork.task(fn)
    with pytest.raises(tickwork.NotImportable, match=words):
        tickwork.job_from(fn, name="x")


async def test_a_decorated_function_becomes_a_job_that_runs(client: AsyncClient) -> None:
    job = tickwork.job_from(decorated.report, name="report", schedule="0 3 * * *")
    created = await client.create_job(job)
    (task,) = created["tasks"]
    assert (task["config"]["target"], task["timeout"], created["queue"]) == (
        "tests.fixtures.decorated:report",
        30,
        "reports",
    )
    assert task["retry"] is not None and task["retry"]["max_attempts"] == 3
    # The function's parameters are the job's params, typed from its annotations.
    assert created["params"]["properties"] == {"day": {"type": "string"}}
    assert created["params"]["required"] == ["day"]
    run = await client.trigger("report", params={"day": "2026-05-01"})
    config = run["task_runs"][0]["config"]
    runner = PythonRunner()
    try:
        sink = MemorySink()
        task_run = make_task_run(TaskKind.PYTHON, config)
        result = await runner.run(task_run, sink, asyncio.Event())
    finally:
        await runner.aclose()
        capture.uninstall()
    assert result.ok
    assert sink.entries[0] == ("stdout", "report for 2026-05-01\n")
