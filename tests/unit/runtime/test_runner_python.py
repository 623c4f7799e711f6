"""The python runner: targets, results, failures, output capture, timeout and cancel."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.fixtures import tasks
from tests.fixtures.sinks import MemorySink, eventually
from tests.fixtures.task_runs import make_task_run
from tickwork.core.model import TaskKind
from tickwork.ports import RunResult
from tickwork.worker import capture
from tickwork.worker.runners.python import PythonRunner

T = "tests.fixtures.tasks"


@pytest.fixture(autouse=True)
def restore_streams() -> Iterator[None]:
    # The runner installs the capture proxies during the test; take them away afterwards.
    yield
    capture.uninstall()


@pytest.fixture
async def runner() -> AsyncIterator[PythonRunner]:
    runner = PythonRunner()
    yield runner
    await runner.aclose()


async def run(
    runner: PythonRunner,
    target: str,
    kwargs: dict[str, Any] | None = None,
    *,
    timeout: float | None = None,
    cancel: asyncio.Event | None = None,
) -> tuple[RunResult, MemorySink]:
    sink = MemorySink()
    config: dict[str, Any] = {"target": target}
    if kwargs is not None:
        config["kwargs"] = kwargs
    task_run = make_task_run(TaskKind.PYTHON, config, timeout=timeout)
    result = await runner.run(task_run, sink, cancel or asyncio.Event())
    return result, sink


async def test_python_sync_function_prints_and_returns_json_result(runner: PythonRunner) -> None:
    result, sink = await run(runner, f"{T}:hello", {"name": "ada"})
    assert result.ok
    assert sink.entries == [
        ("stdout", "hello ada\n"),
        ("system", 'result: {"greeting": "hello ada"}\n'),
    ]


async def test_python_async_function_is_awaited(runner: PythonRunner) -> None:
    result, sink = await run(runner, f"{T}:hello_async", {"name": "ada"})
    assert result.ok
    assert sink.text("stdout") == "hello ada from a coroutine\n"
    assert sink.text("system") == 'result: "ADA"\n'


async def test_python_none_result_writes_no_result_line(runner: PythonRunner) -> None:
    result, sink = await run(runner, f"{T}:noop")
    assert result == RunResult(ok=True)
    assert sink.entries == []


async def test_python_unserializable_result_is_named_not_dumped(runner: PythonRunner) -> None:
    result, sink = await run(runner, f"{T}:unserializable")
    assert result.ok
    assert sink.text("system") == "result is not JSON-serializable: object\n"


async def test_python_sync_exception_fails_with_type_message_and_traceback(
    runner: PythonRunner,
) -> None:
    result, sink = await run(runner, f"{T}:fail", {"message": "bad input"})
    assert result == RunResult(ok=False, error="ValueError: bad input")
    stderr = sink.text("stderr")
    assert stderr.startswith("Traceback (most recent call last):")
    assert 'tasks.py", line' in stderr and "in fail" in stderr
    assert "concurrent/futures" not in stderr  # plumbing frames are trimmed
    assert stderr.rstrip().endswith("ValueError: bad input")


async def test_python_async_exception_fails_with_type_and_message(runner: PythonRunner) -> None:
    result, sink = await run(runner, f"{T}:fail_async")
    assert result.error == "RuntimeError: async boom"
    assert "in fail_async" in sink.text("stderr")


@pytest.mark.parametrize("target", [f"{T}:needs_kwargs", f"{T}:needs_kwargs_async"])
async def test_python_wrong_kwargs_fail_the_attempt(runner: PythonRunner, target: str) -> None:
    result, _ = await run(runner, target, {"nope": 1})
    assert not result.ok
    assert result.error is not None and result.error.startswith("TypeError: ")
    assert "unexpected keyword argument 'nope'" in result.error


@pytest.mark.parametrize(
    ("target", "error"),
    [
        (
            "tests.nowhere.mod:fn",
            "cannot import tests.nowhere.mod:fn: No module named 'tests.nowhere'",
        ),
        (
            f"{T}:missing",
            f"cannot import {T}:missing: module '{T}' has no attribute 'missing'",
        ),
        (f"{T}:not_callable", f"cannot import {T}:not_callable: not_callable is not callable"),
        (
            "tests.fixtures.broken_module:fn",
            "cannot import tests.fixtures.broken_module:fn: RuntimeError: broken at import time",
        ),
        ("no_colon_here", "config.target: must look like 'module.path:function'"),
    ],
)
async def test_python_bad_target_is_a_clear_failure(
    runner: PythonRunner, target: str, error: str
) -> None:
    result, _ = await run(runner, target)
    assert result == RunResult(ok=False, error=error)


async def test_python_kwargs_must_be_an_object(runner: PythonRunner) -> None:
    sink = MemorySink()
    task_run = make_task_run(TaskKind.PYTHON, {"target": f"{T}:noop", "kwargs": [1]})
    result = await runner.run(task_run, sink, asyncio.Event())
    assert result.error == "config.kwargs: must be a JSON object of keyword arguments"


async def test_python_sys_streams_go_to_their_own_log_streams_joined_by_line(
    runner: PythonRunner,
) -> None:
    result, sink = await run(runner, f"{T}:write_streams")
    assert result.ok
    assert sink.entries == [
        ("stdout", "to stdout\n"),
        ("stderr", "to stderr\n"),
        ("stdout", "partial line\n"),
    ]


async def test_python_concurrent_async_tasks_capture_only_their_own_prints(
    runner: PythonRunner,
) -> None:
    (ra, a), (rb, b) = await asyncio.gather(
        run(runner, f"{T}:chatter_async", {"tag": "A", "lines": 50}),
        run(runner, f"{T}:chatter_async", {"tag": "B", "lines": 50}),
    )
    assert ra.ok and rb.ok
    assert a.text() == "".join(f"A {i}\n" for i in range(50))
    assert b.text() == "".join(f"B {i}\n" for i in range(50))


async def test_python_concurrent_sync_tasks_in_threads_capture_only_their_own_prints(
    runner: PythonRunner,
) -> None:
    tasks.BARRIERS["sync-isolation"] = threading.Barrier(2)
    kwargs = {"lines": 300, "barrier_key": "sync-isolation"}
    (ra, a), (rb, b) = await asyncio.gather(
        run(runner, f"{T}:chatter_sync", {"tag": "A", **kwargs}),
        run(runner, f"{T}:chatter_sync", {"tag": "B", **kwargs}),
    )
    assert ra.ok and rb.ok
    assert a.text() == "".join(f"A {i}\n" for i in range(300))
    assert b.text() == "".join(f"B {i}\n" for i in range(300))


async def test_python_output_outside_tasks_reaches_the_original_stream(
    runner: PythonRunner,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await run(runner, f"{T}:hello", {"name": "inside"})
    print("outside")
    out = capsys.readouterr().out
    assert "outside\n" in out and "inside" not in out


async def test_python_timeout_cancels_an_async_function(runner: PythonRunner) -> None:
    tasks.slow_async_cancelled.clear()
    started = time.monotonic()
    result, _ = await run(runner, f"{T}:slow_async", timeout=0.1)
    assert result.timed_out and not result.ok
    assert result.error == "timed out after 0.1 s"
    assert tasks.slow_async_cancelled.is_set()
    assert time.monotonic() - started < 1.0


async def test_python_cancel_returns_at_once_and_leaves_a_sync_thread_running(
    runner: PythonRunner,
) -> None:
    release = tasks.RELEASES["cancel-sync"] = threading.Event()
    tasks.slow_sync_started.clear()
    tasks.slow_sync_finished.clear()
    cancel = asyncio.Event()
    sink = MemorySink()
    task_run = make_task_run(
        TaskKind.PYTHON, {"target": f"{T}:slow_sync", "kwargs": {"release_key": "cancel-sync"}}
    )
    attempt = asyncio.ensure_future(runner.run(task_run, sink, cancel))
    await eventually(tasks.slow_sync_started.is_set)
    cancel.set()
    result = await asyncio.wait_for(attempt, timeout=1.0)
    assert result.cancelled and result.error == "cancelled"
    assert not tasks.slow_sync_finished.is_set()
    release.set()  # the abandoned thread finishes later; its output still reaches the log
    await eventually(lambda: "slow_sync done\n" in sink.text("stdout"))


async def test_python_cancel_set_before_start_runs_nothing(runner: PythonRunner) -> None:
    cancel = asyncio.Event()
    cancel.set()
    result, sink = await run(runner, f"{T}:hello", {"name": "x"}, cancel=cancel)
    assert result.cancelled
    assert sink.entries == []


async def test_python_runner_caches_imported_targets(runner: PythonRunner) -> None:
    await run(runner, f"{T}:noop")
    sys.modules.pop(T)  # were the runner to import again, this would be a fresh module
    try:
        result, _ = await run(runner, f"{T}:noop")
        assert result.ok
        assert T not in sys.modules
    finally:
        sys.modules[T] = tasks


async def test_python_sync_functions_run_in_the_runners_own_threads(runner: PythonRunner) -> None:
    # Not in the loop's default executor, which DNS lookups of http tasks depend on.
    result, sink = await run(runner, f"{T}:thread_name")
    assert result.ok
    assert sink.text("system").startswith('result: "tickwork-task')
