"""The python runner's task processes: user code can neither stall the worker nor outlive
its timeout or cancel, and it sees its own context."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.sinks import MemorySink
from tests.fixtures.sinks import eventually as until
from tests.fixtures.task_runs import make_task_run
from tickwork.core.model import TaskKind
from tickwork.ports import RunResult
from tickwork.runtime.cancel import CancelSignal
from tickwork.worker.runners.python_process import ProcessPythonRunner
from tickwork.worker.runners.shell import tickwork_env

T = "tests.fixtures.process_tasks"


@pytest.fixture
async def runner() -> AsyncIterator[ProcessPythonRunner]:
    runner = ProcessPythonRunner(max_processes=4, cancel_grace=0.5)
    # Warm: on a loaded machine starting a process can take longer than a test's timeouts.
    warm = [run(runner, "tests.fixtures.tasks:noop") for _ in range(4)]
    assert all(r.ok for r, _ in await asyncio.gather(*warm))
    yield runner
    await runner.aclose()


async def run(
    runner: ProcessPythonRunner,
    target: str,
    kwargs: dict[str, Any] | None = None,
    *,
    timeout: float | None = None,
    cancel: asyncio.Event | None = None,
    attempt: int = 1,
) -> tuple[RunResult, MemorySink]:
    sink = MemorySink()
    config = {"target": target, "kwargs": kwargs or {}}
    task_run = make_task_run(TaskKind.PYTHON, config, timeout=timeout, attempt=attempt)
    # A ``CancelSignal``, as the worker pool hands runners (a plain Event works too).
    return await runner.run(task_run, sink, cancel or CancelSignal()), sink


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (dead, not yet reaped by its parent) counts as gone.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def test_output_result_and_failure_come_back(runner: ProcessPythonRunner) -> None:
    result, sink = await run(runner, "tests.fixtures.tasks:hello", {"name": "ada"})
    assert result.ok and result.result == {"greeting": "hello ada"}
    assert sink.entries == [
        ("stdout", "hello ada\n"),
        ("system", 'result: {"greeting": "hello ada"}\n'),
    ]
    result, sink = await run(runner, "tests.fixtures.tasks:fail", {"message": "boom"})
    assert (result.ok, result.error) == (False, "ValueError: boom")
    assert "raise ValueError(message)" in sink.text("stderr")
    result, _ = await run(runner, "tests.nope:fn")
    assert not result.ok and "cannot import tests.nope:fn" in (result.error or "")


async def test_a_blocking_async_task_does_not_stall_the_worker_and_times_out(
    runner: ProcessPythonRunner,
) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    beat = asyncio.create_task(ticker())
    started = time.monotonic()
    result, sink = await run(runner, f"{T}:blocks_the_loop", {"seconds": 8}, timeout=1.0)
    took = time.monotonic() - started
    beat.cancel()
    assert result.timed_out and not result.ok  # was recorded `success` after 8 s
    assert took < 4.0
    assert ticks >= 10  # the worker's loop kept running meanwhile
    assert "timed_out: the task's process was stopped" in sink.text("system")


async def test_stuck_sync_tasks_are_killed_and_later_tasks_still_run(
    runner: ProcessPythonRunner, tmp_path: Path
) -> None:
    # More stuck tasks than processes: each is stopped at its timeout, and the slots free up.
    stuck = [
        run(runner, f"{T}:sleeps", {"seconds": 60, "started": str(tmp_path / f"s{i}")}, timeout=3)
        for i in range(6)
    ]
    results = await asyncio.gather(*stuck)
    assert all(r.timed_out for r, _ in results)
    pids = [int((tmp_path / f"s{i}").read_text()) for i in range(6)]
    await until(lambda: not any(alive(p) for p in pids))
    result, _ = await run(runner, "tests.fixtures.tasks:noop", timeout=5)
    assert result.ok


@pytest.mark.parametrize("signal", [CancelSignal, asyncio.Event])
async def test_cancel_stops_the_task_and_its_subprocesses(
    runner: ProcessPythonRunner, tmp_path: Path, signal: type[asyncio.Event]
) -> None:
    cancel = signal()
    pidfile = tmp_path / "pid"
    attempt = asyncio.create_task(
        run(runner, f"{T}:spawns", {"pidfile": str(pidfile), "new_session": False}, cancel=cancel)
    )
    await until(
        lambda: pidfile.exists() and pidfile.read_text().strip() != ""
    )  # written, not just made
    grandchild = int(pidfile.read_text())
    cancel.set()
    result, _ = await attempt
    assert result.cancelled
    await until(lambda: not alive(grandchild))


async def test_sigterm_lets_finally_blocks_run(runner: ProcessPythonRunner, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    result, _ = await run(runner, f"{T}:cleans_up", {"marker": str(marker)}, timeout=2)
    assert result.timed_out
    assert marker.read_text() == "cleaned up"


async def test_a_process_that_dies_fails_the_attempt_and_is_replaced(
    runner: ProcessPythonRunner,
) -> None:
    result, _ = await run(runner, f"{T}:exits_hard")
    assert (result.ok, result.error) == (False, "the task's process died (exit code 3)")
    result, _ = await run(runner, "tests.fixtures.tasks:noop")
    assert result.ok


async def test_processes_are_reused_while_attempts_end_well(runner: ProcessPythonRunner) -> None:
    first, _ = await run(runner, f"{T}:pid")
    second, _ = await run(runner, f"{T}:pid")
    assert first.result == second.result != os.getpid()


async def test_a_task_sees_its_context_without_asking_for_it(runner: ProcessPythonRunner) -> None:
    result, _ = await run(runner, f"{T}:context", attempt=2)
    assert result.ok
    assert result.result == {
        "job": "nightly",
        "task": "main",
        "run_id": "run-1",
        "task_run_id": "tr-1",
        "attempt": 2,
        "logical_date": "2026-03-29T01:30:00+00:00",
        "params": {},
    }


async def test_current_task_outside_a_task_says_so() -> None:
    import tickwork

    with pytest.raises(LookupError, match="only available inside a running task"):
        tickwork.current_task()


async def test_attempts_sharing_a_config_object_and_then_another_each_get_their_own(
    runner: ProcessPythonRunner,
) -> None:
    # The task runs of one claim share their config object: the runner checks it once.
    async def attempt(config: dict[str, Any]) -> RunResult:
        task_run = make_task_run(TaskKind.PYTHON, config)
        return await runner.run(task_run, MemorySink(), CancelSignal())

    shared = {"target": "tests.fixtures.tasks:hello", "kwargs": {"name": "ada"}}
    for _ in range(2):
        assert (await attempt(shared)).result == {"greeting": "hello ada"}
    other = {"target": "tests.fixtures.tasks:hello", "kwargs": {"name": "bob"}}
    assert (await attempt(other)).result == {"greeting": "hello bob"}
    for _ in range(2):
        result = await attempt({"target": "not a target"})
        assert not result.ok and "config.target" in (result.error or "")


async def test_the_task_process_has_the_attempts_tickwork_variables(
    runner: ProcessPythonRunner,
) -> None:
    # Made in the task process from the attempt's context (as a shell task gets them).
    for attempt in (2, 3):
        result, _ = await run(runner, f"{T}:tickwork_vars", attempt=attempt)
        assert result.ok
        expected = tickwork_env(make_task_run(TaskKind.PYTHON, {}, attempt=attempt))
        assert result.result == expected
        assert expected["TICKWORK_LOGICAL_DATE"] == "2026-03-29T01:30:00Z"
        assert expected["TICKWORK_ATTEMPT"] == str(attempt)
