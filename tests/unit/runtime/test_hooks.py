"""The callback executor against a real local HTTP server and real python callbacks."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tests.fixtures import callbacks
from tests.fixtures.http_server import ServerState, serve_http
from tests.fixtures.sinks import eventually
from tests.fixtures.task_runs import LOGICAL_DATE, make_task_run
from tickwork.core.model import (
    Callback,
    CallbackEvent,
    Outcome,
    TaskKind,
    TaskRun,
    TaskRunState,
)
from tickwork.hooks import CallbackContext, Hooks, LogTail, event_for
from tickwork.security.ssrf import UrlGuard, parse_allow

FIXTURES = "tests.fixtures.callbacks"
STARTED = datetime(2026, 3, 29, 1, 30, 5, tzinfo=UTC)
FINISHED = datetime(2026, 3, 29, 1, 30, 7, 250000, tzinfo=UTC)
ErrorReport = tuple[str, int, str]


def py(name: str) -> Callback:
    return Callback(TaskKind.PYTHON, {"target": f"{FIXTURES}:{name}"})


def web(url: str, **headers: str) -> Callback:
    return Callback(TaskKind.HTTP, {"url": url, "headers": headers})


def hooked(job_name: str, **hooks: Callback) -> TaskRun:
    task_run = make_task_run(TaskKind.SHELL, {"argv": ["true"]})
    return replace(
        task_run, job_name=job_name, callbacks={CallbackEvent(k): v for k, v in hooks.items()}
    )


def ended(state: TaskRunState = TaskRunState.FAILED, error: str | None = "exit code 3") -> Outcome:
    return Outcome(
        task_run_id="tr-1",
        attempt=2,
        state=state,
        finished_at=FINISHED,
        started_at=STARTED,
        error=error,
        exit_code=3 if error else None,
        worker_id="host:42",
    )


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tickwork.hooks" and r.levelno == logging.WARNING
    ]


@pytest.fixture
def server() -> Iterator[tuple[str, ServerState]]:
    with serve_http() as served:
        yield served


@pytest.fixture
def errors() -> list[ErrorReport]:
    return []


@pytest.fixture
async def hooks(errors: list[ErrorReport]) -> AsyncIterator[Hooks]:
    hooks = Hooks(
        url_guard=UrlGuard(parse_allow("127.0.0.0/8")).check,
        timeout=2.0,
        on_error=lambda *report: errors.append(report),
    )
    yield hooks
    await hooks.close(1.0)


async def settled(hooks: Hooks) -> None:
    await eventually(lambda: hooks.pending == 0)


# -- events and context ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("state", "event"),
    [
        (TaskRunState.SUCCESS, CallbackEvent.ON_SUCCESS),
        (TaskRunState.FAILED, CallbackEvent.ON_FAILURE),
        (TaskRunState.UP_FOR_RETRY, CallbackEvent.ON_RETRY),
        (TaskRunState.CANCELLED, None),
        (TaskRunState.SKIPPED, None),
        (TaskRunState.UPSTREAM_FAILED, None),
    ],
)
def test_event_for_maps_outcome_states(state: TaskRunState, event: CallbackEvent | None) -> None:
    assert event_for(state) is event


def test_context_json_has_every_field_with_iso_instants() -> None:
    context = CallbackContext.of(
        CallbackEvent.ON_FAILURE, hooked("nightly"), ended(), "line 1\nline 2\n"
    )
    assert context.to_json() == {
        "event": "on_failure",
        "job_name": "nightly",
        "run_id": "run-1",
        "logical_date": "2026-03-29T01:30:00+00:00",
        "task_name": "main",
        "task_run_id": "tr-1",
        "attempt": 2,
        "state": "failed",
        "error": "exit code 3",
        "exit_code": 3,
        "started_at": "2026-03-29T01:30:05+00:00",
        "finished_at": "2026-03-29T01:30:07.250000+00:00",
        "log_tail": "line 1\nline 2\n",
        "worker_id": "host:42",
    }
    assert context.logical_date == LOGICAL_DATE


# -- the log tail ---------------------------------------------------------------------
def test_log_tail_keeps_the_last_lines_across_writes_and_streams() -> None:
    tail = LogTail(max_lines=3, max_bytes=1024)
    for i in range(10):
        tail.write("stdout" if i % 2 else "stderr", f"line {i}\n")
    tail.write("system", "partial")
    assert tail.text() == "line 8\nline 9\npartial"


def test_log_tail_keeps_whole_output_when_short() -> None:
    tail = LogTail()
    tail.write("stdout", "a\nb")
    tail.write("stdout", "c\n")
    assert tail.text() == "a\nbc\n"
    assert LogTail().text() == ""


def test_log_tail_is_cut_to_its_last_bytes_without_splitting_characters() -> None:
    tail = LogTail(max_lines=50, max_bytes=10)
    tail.write("stdout", "é" * 20)  # 40 bytes
    assert tail.text() == "é" * 5
    tail.write("stdout", "xé")  # the last 10 bytes start in the middle of an é
    assert tail.text() == "éééx" + "é"


def test_log_tail_memory_stays_bounded() -> None:
    tail = LogTail(max_lines=5, max_bytes=100)
    for i in range(10_000):
        tail.write("stdout", f"{i}\n")
    tail.write("stdout", "y" * 1_000_000)
    assert tail.text() == "y" * 100
    assert sum(len(chunk) for chunk, _ in tail._chunks) <= 200


# -- webhooks -------------------------------------------------------------------------
async def test_webhook_posts_the_context_as_json(
    hooks: Hooks, server: tuple[str, ServerState], errors: list[ErrorReport]
) -> None:
    base, state = server
    task_run = hooked("nightly", on_failure=web(f"{base}/status/204", Authorization="Bearer x"))
    hooks.fire(task_run, ended(), "boom\n")
    await eventually(lambda: len(state.requests) == 1)
    await settled(hooks)
    sent = state.requests[0]
    assert (sent.method, sent.path) == ("POST", "/status/204")
    assert sent.headers["User-Agent"] == "tickwork"
    assert sent.headers["Authorization"] == "Bearer x"
    assert sent.headers["Content-Type"] == "application/json"
    expected = CallbackContext.of(CallbackEvent.ON_FAILURE, task_run, ended(), "boom\n")
    assert sent.json() == expected.to_json()
    assert errors == []


async def test_only_the_callback_of_the_outcomes_event_fires(
    hooks: Hooks, server: tuple[str, ServerState]
) -> None:
    base, state = server
    task_run = hooked(
        "nightly",
        on_success=web(f"{base}/status/200?on=success"),
        on_retry=web(f"{base}/status/200?on=retry"),
    )
    hooks.fire(task_run, ended(TaskRunState.FAILED))  # no on_failure: nothing to do
    hooks.fire(task_run, ended(TaskRunState.CANCELLED))
    assert hooks.pending == 0
    hooks.fire(task_run, ended(TaskRunState.UP_FOR_RETRY))
    await eventually(lambda: len(state.requests) == 1)
    assert state.requests[0].json()["event"] == "on_retry"


async def test_webhook_non_2xx_is_logged_and_reported(
    hooks: Hooks,
    server: tuple[str, ServerState],
    errors: list[ErrorReport],
    caplog: pytest.LogCaptureFixture,
) -> None:
    base, _ = server
    hooks.fire(hooked("nightly", on_failure=web(f"{base}/status/500")), ended())
    await settled(hooks)
    message = f"webhook POST {base}/status/500 answered HTTP 500 Internal Server Error"
    assert errors == [("tr-1", 2, f"on_failure callback failed: {message}")]
    assert warnings(caplog) == [
        f"on_failure callback of task run tr-1 (attempt 2) failed: {message}"
    ]


async def test_webhook_to_loopback_is_refused_by_the_default_guard(
    server: tuple[str, ServerState], errors: list[ErrorReport]
) -> None:
    base, state = server
    hooks = Hooks(on_error=lambda *report: errors.append(report))
    try:
        hooks.fire(hooked("nightly", on_failure=web(f"{base}/status/200")), ended())
        await settled(hooks)
    finally:
        await hooks.close(1.0)
    assert state.requests == []
    [(_, _, message)] = errors
    assert message.startswith("on_failure callback failed: webhook not sent: refused: 127.0.0.1")
    assert "is loopback" in message


async def test_webhook_with_a_bad_url_is_reported(hooks: Hooks, errors: list[ErrorReport]) -> None:
    hooks.fire(hooked("nightly", on_failure=web("ftp://example.org/")), ended())
    await settled(hooks)
    assert errors == [
        (
            "tr-1",
            2,
            "on_failure callback failed: config.url: must be an absolute http:// or https:// URL",
        )
    ]


async def test_webhook_that_answers_too_late_times_out(
    server: tuple[str, ServerState], errors: list[ErrorReport]
) -> None:
    base, _ = server
    hooks = Hooks(
        url_guard=UrlGuard(parse_allow("127.0.0.0/8")).check,
        timeout=0.2,
        on_error=lambda *report: errors.append(report),
    )
    try:
        hooks.fire(hooked("nightly", on_failure=web(f"{base}/slow")), ended())
        await settled(hooks)
    finally:
        await hooks.close(1.0)
    assert errors == [("tr-1", 2, "on_failure callback failed: timed out after 0.2 s")]


# -- python callbacks -----------------------------------------------------------------
async def test_sync_callable_gets_the_context_in_a_hook_thread(hooks: Hooks) -> None:
    task_run = hooked("py-sync", on_success=py("record"))
    hooks.fire(task_run, ended(TaskRunState.SUCCESS, error=None), "done\n")
    await eventually(lambda: len(callbacks.calls("py-sync")) == 1)
    [(context, thread)] = [c for c in callbacks.CALLS if c[0].job_name == "py-sync"]
    assert context == CallbackContext.of(
        CallbackEvent.ON_SUCCESS, task_run, ended(TaskRunState.SUCCESS, error=None), "done\n"
    )
    assert thread.startswith("tickwork-hook")


async def test_async_callable_is_awaited_on_the_loop(hooks: Hooks) -> None:
    hooks.fire(hooked("py-async", on_retry=py("record_async")), ended(TaskRunState.UP_FOR_RETRY))
    await eventually(lambda: len(callbacks.calls("py-async")) == 1)
    [(context, thread)] = [c for c in callbacks.CALLS if c[0].job_name == "py-async"]
    assert context.event is CallbackEvent.ON_RETRY and context.error == "exit code 3"
    assert thread == threading.current_thread().name


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("fail", "raised ValueError: callback broke for tr-1"),
        ("fail_async", "raised RuntimeError: async callback broke"),
        ("missing", "cannot import tests.fixtures.callbacks:missing: module "),
        ("not_callable", "cannot import tests.fixtures.callbacks:not_callable: not_callable is"),
    ],
)
async def test_failing_callable_is_logged_and_reported(
    hooks: Hooks,
    errors: list[ErrorReport],
    caplog: pytest.LogCaptureFixture,
    target: str,
    message: str,
) -> None:
    hooks.fire(hooked("py-fail", on_failure=py(target)), ended())  # returns, never raises
    await settled(hooks)
    [(task_run_id, attempt, reported)] = errors
    assert (task_run_id, attempt) == ("tr-1", 2)
    assert reported.startswith(f"on_failure callback failed: {message}")
    [logged] = warnings(caplog)
    assert logged.startswith(f"on_failure callback of task run tr-1 (attempt 2) failed: {message}")


@pytest.mark.parametrize(
    ("callback", "message"),
    [
        (
            Callback(TaskKind.PYTHON, {"target": "no colon"}),
            "config.target: must look like 'module.path:function'",
        ),
        (Callback(TaskKind.SHELL, {"argv": ["true"]}), "a shell callback cannot run"),
    ],
)
async def test_bad_callback_config_is_reported(
    hooks: Hooks, errors: list[ErrorReport], callback: Callback, message: str
) -> None:
    hooks.fire(hooked("bad", on_failure=callback), ended())
    await settled(hooks)
    [(_, _, reported)] = errors
    assert reported.startswith(f"on_failure callback failed: {message}")


@pytest.mark.parametrize("target", ["hang_async", "block_thread"])
async def test_callable_past_its_timeout_is_abandoned(
    errors: list[ErrorReport], target: str
) -> None:
    callbacks.RELEASES["py-slow"] = release = threading.Event()
    hooks = Hooks(timeout=0.1, on_error=lambda *report: errors.append(report))
    try:
        started = time.monotonic()
        hooks.fire(hooked("py-slow", on_failure=py(target)), ended())
        await settled(hooks)
        assert time.monotonic() - started < 2.0
    finally:
        release.set()
        await hooks.close(1.0)
    assert errors == [("tr-1", 2, "on_failure callback failed: timed out after 0.1 s")]


async def test_on_error_that_raises_is_logged_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken_sink(task_run_id: str, attempt: int, message: str) -> None:
        raise RuntimeError("sink down")

    hooks = Hooks(on_error=broken_sink)
    try:
        hooks.fire(hooked("sink", on_failure=py("fail")), ended())
        await settled(hooks)
    finally:
        await hooks.close(1.0)
    assert any("on_error of task run tr-1 failed" in r.getMessage() for r in caplog.records)


# -- bounds and shutdown --------------------------------------------------------------
async def test_concurrency_is_bounded(errors: list[ErrorReport]) -> None:
    callbacks.GATES["gated"] = gate = asyncio.Event()
    hooks = Hooks(concurrency=2, on_error=lambda *report: errors.append(report))
    try:
        for _ in range(5):
            hooks.fire(hooked("gated", on_failure=py("wait_for_gate")), ended())
        await eventually(lambda: len(callbacks.calls("gated")) == 2)
        await asyncio.sleep(0.05)  # give a third the chance to start, were it allowed to
        assert len(callbacks.calls("gated")) == 2
        gate.set()
        await eventually(lambda: len(callbacks.calls("gated")) == 5)
        await settled(hooks)
    finally:
        await hooks.close(1.0)
    assert errors == []


async def test_backlog_over_its_bound_drops_and_reports(
    errors: list[ErrorReport], caplog: pytest.LogCaptureFixture
) -> None:
    callbacks.GATES["backlog"] = gate = asyncio.Event()
    hooks = Hooks(concurrency=1, backlog=3, on_error=lambda *report: errors.append(report))
    try:
        for _ in range(5):
            hooks.fire(hooked("backlog", on_failure=py("wait_for_gate")), ended())
        assert hooks.pending == 3
        dropped = "on_failure callback failed: dropped: 3 callbacks already pending"
        assert errors == [("tr-1", 2, dropped)] * 2
        assert len(warnings(caplog)) == 2
        gate.set()
        await settled(hooks)
    finally:
        await hooks.close(1.0)
    assert len(callbacks.calls("backlog")) == 3


async def test_close_waits_for_callbacks_within_the_grace(errors: list[ErrorReport]) -> None:
    callbacks.GATES["graceful"] = gate = asyncio.Event()
    hooks = Hooks(on_error=lambda *report: errors.append(report))
    hooks.fire(hooked("graceful", on_success=py("wait_for_gate")), ended(TaskRunState.SUCCESS))
    await eventually(lambda: len(callbacks.calls("graceful")) == 1)
    closing = asyncio.ensure_future(hooks.close(5.0))
    await asyncio.sleep(0.05)
    assert not closing.done()  # still waiting for the callback
    gate.set()
    await asyncio.wait_for(closing, 2.0)
    assert hooks.pending == 0
    assert errors == []


async def test_close_cancels_callbacks_past_the_grace_and_drops_new_ones(
    errors: list[ErrorReport],
) -> None:
    hooks = Hooks(timeout=30.0, on_error=lambda *report: errors.append(report))
    hooks.fire(hooked("stuck", on_failure=py("hang_async")), ended())
    hooks.fire(hooked("stuck", on_retry=py("hang_async")), ended(TaskRunState.UP_FOR_RETRY))
    started = time.monotonic()
    await hooks.close(0.1)
    assert time.monotonic() - started < 1.5
    assert hooks.pending == 0
    hooks.fire(hooked("late", on_failure=py("record")), ended())
    cancelled = "callback failed: cancelled: tickwork stopped before it finished"
    assert sorted(errors) == [
        ("tr-1", 2, f"on_failure {cancelled}"),
        ("tr-1", 2, "on_failure callback failed: dropped: shutting down"),
        ("tr-1", 2, f"on_retry {cancelled}"),
    ]
    assert callbacks.calls("late") == []
