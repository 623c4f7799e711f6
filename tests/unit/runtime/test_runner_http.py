"""The http runner against a real local HTTP server."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest

from tests.fixtures.http_server import ServerState, serve_http
from tests.fixtures.sinks import MemorySink, eventually
from tests.fixtures.task_runs import make_task_run
from tickwork.core.model import TaskKind
from tickwork.ports import RunResult
from tickwork.worker.runners import HttpRunner, RequestRefused, build_runners, close_runners
from tickwork.worker.runners.http import LOGGED_BODY_LIMIT


@pytest.fixture
def server() -> Iterator[tuple[str, ServerState]]:
    with serve_http() as served:
        yield served


@pytest.fixture
def base(server: tuple[str, ServerState]) -> str:
    return server[0]


@pytest.fixture
async def runner() -> AsyncIterator[HttpRunner]:
    runner = HttpRunner()
    yield runner
    await runner.aclose()


async def run(
    runner: HttpRunner,
    config: dict[str, Any],
    *,
    timeout: float | None = None,
    cancel: asyncio.Event | None = None,
    sink: MemorySink | None = None,
) -> tuple[RunResult, MemorySink]:
    sink = sink or MemorySink()
    task_run = make_task_run(TaskKind.HTTP, config, timeout=timeout)
    return await runner.run(task_run, sink, cancel or asyncio.Event()), sink


async def test_http_2xx_succeeds_and_logs_request_status_and_body(
    runner: HttpRunner, base: str
) -> None:
    result, sink = await run(runner, {"url": f"{base}/status/200"})
    assert result == RunResult(ok=True)
    assert sink.entries == [
        ("system", f"GET {base}/status/200\n"),
        ("system", "HTTP 200 OK\n"),
        ("stdout", "status body"),
    ]


async def test_http_non_2xx_fails_with_status_line(runner: HttpRunner, base: str) -> None:
    result, sink = await run(runner, {"method": "get", "url": f"{base}/status/503"})
    assert result == RunResult(ok=False, error="HTTP 503 Service Unavailable")
    assert sink.text("stdout") == "status body"


async def test_http_redirect_is_not_followed(runner: HttpRunner, base: str) -> None:
    result, _ = await run(runner, {"url": f"{base}/redirect"})
    assert result.error == "HTTP 302 Found"


async def test_http_string_body_and_headers_are_sent_as_is(runner: HttpRunner, base: str) -> None:
    config = {
        "method": "POST",
        "url": f"{base}/echo",
        "headers": {"X-Token": "abc", "Content-Type": "text/plain"},
        "body": '{"not": "re-encoded"}',
    }
    result, sink = await run(runner, config)
    assert result.ok
    echo = json.loads(sink.text("stdout"))
    assert echo["method"] == "POST"
    assert echo["body"] == '{"not": "re-encoded"}'
    assert echo["headers"]["X-Token"] == "abc"
    assert echo["headers"]["Content-Type"] == "text/plain"


async def test_http_json_body_is_sent_as_json(runner: HttpRunner, base: str) -> None:
    config = {"method": "PUT", "url": f"{base}/echo", "body": {"n": [1, 2]}}
    result, sink = await run(runner, config)
    assert result.ok
    echo = json.loads(sink.text("stdout"))
    assert json.loads(echo["body"]) == {"n": [1, 2]}
    assert echo["headers"]["Content-Type"] == "application/json"


async def test_http_logged_body_is_cut_at_64_kib(runner: HttpRunner, base: str) -> None:
    result, sink = await run(runner, {"url": f"{base}/big"})
    assert result.ok
    assert sink.text("stdout") == "x" * LOGGED_BODY_LIMIT
    assert "response body truncated to its first 65536 bytes" in sink.text("system")


async def test_http_body_is_decoded_with_the_response_charset(
    runner: HttpRunner, base: str
) -> None:
    _, sink = await run(runner, {"url": f"{base}/latin1"})
    assert sink.text("stdout") == "café"


async def test_http_timeout_fails_the_attempt_promptly(runner: HttpRunner, base: str) -> None:
    started = time.monotonic()
    result, _ = await run(runner, {"url": f"{base}/slow"}, timeout=0.2)
    assert result == RunResult(ok=False, error="timed out after 0.2 s", timed_out=True)
    assert time.monotonic() - started < 1.0


async def test_http_cancel_abandons_the_request_within_one_second(
    runner: HttpRunner, server: tuple[str, ServerState]
) -> None:
    base, state = server
    cancel, sink = asyncio.Event(), MemorySink()
    attempt = asyncio.ensure_future(run(runner, {"url": f"{base}/slow"}, cancel=cancel, sink=sink))
    await eventually(lambda: "/slow" in state.paths)
    cancel.set()
    result, _ = await asyncio.wait_for(attempt, timeout=1.0)
    assert result == RunResult(ok=False, error="cancelled", cancelled=True)
    assert "cancelled: request abandoned" in sink.text("system")


async def test_http_connection_refused_is_a_clear_failure(runner: HttpRunner) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nobody listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result, _ = await run(runner, {"url": f"http://127.0.0.1:{port}/"})
    assert not result.ok and not result.timed_out
    assert result.error is not None
    assert result.error.startswith(f"GET http://127.0.0.1:{port}/ failed: ConnectError: ")


async def test_http_guard_refusal_sends_nothing(server: tuple[str, ServerState]) -> None:
    base, state = server
    seen: list[str] = []

    async def no_loopback(url: httpx2.URL) -> None:
        seen.append(str(url))
        raise RequestRefused(f"{url.host} is a loopback address")

    refusing = HttpRunner(guard=no_loopback)
    try:
        result, sink = await run(refusing, {"url": f"{base}/echo"})
    finally:
        await refusing.aclose()
    assert result == RunResult(ok=False, error="request refused: 127.0.0.1 is a loopback address")
    assert seen == [f"{base}/echo"]
    assert state.paths == []
    assert sink.entries == []


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"url": "ftp://example.org/x"}, "config.url: must be an absolute http:// or https:// URL"),
        ({"url": "/relative"}, "config.url: must be an absolute http:// or https:// URL"),
        ({}, "config.url: must be an absolute http:// or https:// URL"),
        (
            {"url": "http://x.org", "method": "GE T"},
            "config.method: must be an HTTP method such as GET or POST",
        ),
        (
            {"url": "http://x.org", "headers": {"A": 1}},
            "config.headers: must be an object mapping names to strings",
        ),
    ],
)
async def test_http_bad_config_names_the_field(
    runner: HttpRunner, config: dict[str, Any], error: str
) -> None:
    result, _ = await run(runner, config)
    assert result == RunResult(ok=False, error=error)


async def test_build_runners_covers_every_kind_and_close_closes_the_http_client() -> None:
    client = httpx2.AsyncClient()
    runners = build_runners(capture_output=False)
    shared = build_runners(http_client=client, capture_output=False)
    assert set(runners) == set(TaskKind)
    await close_runners(runners)
    http = runners[TaskKind.HTTP]
    assert isinstance(http, HttpRunner)
    assert http.client.is_closed
    await close_runners(shared)  # a client passed in belongs to the caller
    assert not client.is_closed
    await client.aclose()
