"""``EnqueueFastPath`` (``api/fast_path.py``): a plain single enqueue is answered ahead of the
middleware stack; anything else reaches the stack as the client sent it."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from tests.api.conftest import cron_job, error_of
from tickwork.api.auth import Security
from tickwork.api.fast_path import TEMPLATE, EnqueueFastPath
from tickwork.app.services import Services
from tickwork.observe.metrics import REGISTRY
from tickwork.ports import Scope, Store

URL = "/api/v1/jobs/work/runs"
Message = dict[str, Any]


class Stack:
    """The ASGI app below the fast path: records what reaches it, answers 299."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def _call(
    app: Any,
    fastapi_app: FastAPI,
    chunks: list[bytes],
    headers: list[tuple[bytes, bytes]],
    *,
    path: str = URL,
    query: bytes = b"",
) -> tuple[int, bytes]:
    scope = {
        "type": "http", "method": "POST", "path": path, "query_string": query,
        "headers": headers, "app": fastapi_app, "state": {},
    }  # fmt: skip
    left = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return left.pop(0) if left else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body


@pytest.fixture
async def fast(
    api: httpx2.AsyncClient, services: Services, security: Security, admin_token: str
) -> tuple[EnqueueFastPath, Stack, list[tuple[bytes, bytes]]]:
    params = {"properties": {"n": {"type": "integer"}}}
    r = await api.post("/api/v1/jobs", json={**cron_job("work"), "params": params})
    assert r.status_code == 201, r.text
    stack = Stack()
    path = EnqueueFastPath(stack, services=services, security=security, max_body=1000)
    headers = [(b"authorization", b"Bearer " + admin_token.encode())]
    return path, stack, headers


JSON = (b"content-type", b"application/json")


async def test_plain_enqueues_never_reach_the_stack(
    fast: tuple[EnqueueFastPath, Stack, list[tuple[bytes, bytes]]], app: FastAPI
) -> None:
    path, stack, auth = fast
    before = _count()
    for chunks in ([b""], [b""], [b"{}"], [b'{"params": ', b'{"n": 2}, "priority": 3}']):
        status, body = await _call(path, app, chunks, [*auth, JSON])
        assert status == 201, body
        assert body.startswith(b'{"run_id":"')
    assert stack.bodies == []
    assert _count() == before + 4  # the stack's request timer would have counted them


@pytest.mark.parametrize(
    "case",
    [
        ("irregular body", [b'{"priority": ', b'"high"}'], [JSON], b""),
        ("a query", [b"{}"], [JSON], b"a=1"),
        ("a key", [b"{}"], [JSON, (b"idempotency-key", b"k")], b""),
        ("over the limit", [b"{}", b" " * 1000], [JSON], b""),
        ("declared over the limit", [b"{}"], [JSON, (b"content-length", b"1001")], b""),
        ("two content types", [b"{}"], [JSON, JSON], b""),
        ("a text body", [b"{}"], [(b"content-type", b"text/plain")], b""),
    ],
    ids=lambda case: case[0],
)
async def test_other_requests_reach_the_stack_as_sent(
    fast: tuple[EnqueueFastPath, Stack, list[tuple[bytes, bytes]]],
    app: FastAPI,
    case: tuple[str, list[bytes], list[tuple[bytes, bytes]], bytes],
) -> None:
    what, chunks, extra, query = case
    path, stack, auth = fast
    assert await _call(path, app, chunks, [*auth, *extra], query=query) == (299, b""), what
    assert stack.bodies == [b"".join(chunks)]


async def test_a_token_that_fails_goes_to_the_stack(
    fast: tuple[EnqueueFastPath, Stack, list[tuple[bytes, bytes]]], app: FastAPI
) -> None:
    path, stack, _ = fast
    for auth in ([], [(b"authorization", b"Bearer tw_nope_x")], [(b"authorization", b"Basic x")]):
        assert (await _call(path, app, [b"{}"], [*auth, JSON]))[0] == 299
    assert stack.bodies == [b"{}"] * 3


async def test_errors_are_answered_by_the_apps_handlers(
    fast: tuple[EnqueueFastPath, Stack, list[tuple[bytes, bytes]]], app: FastAPI
) -> None:
    path, stack, auth = fast
    status, body = await _call(path, app, [b"{}"], [*auth, JSON], path="/api/v1/jobs/nope/runs")
    assert status == 404 and b'"not_found"' in body
    status, body = await _call(path, app, [b'{"params": {"n": "x"}}'], [*auth, JSON])
    assert status == 422 and b'"field":"params.n"' in body
    assert stack.bodies == []


def _count() -> float:
    value = REGISTRY.get_sample_value(
        "tickwork_http_request_duration_seconds_count",
        {"route": TEMPLATE, "method": "POST", "status": "201"},
    )
    return value or 0.0


async def test_the_fast_path_is_ahead_of_the_whole_stack(
    api: httpx2.AsyncClient, app: FastAPI, admin_token: str
) -> None:
    r = await api.post("/api/v1/jobs", json=cron_job("work"))
    assert r.status_code == 201, r.text
    before = _count()
    r = await api.post(URL, json={})
    assert r.status_code == 201, r.text
    # Starlette's and FastAPI's own layers (server errors, telemetry, body limit) are inside it
    assert isinstance(app.middleware_stack, EnqueueFastPath)
    assert _count() == before + 1


async def test_a_failure_reading_the_token_is_answered_in_the_error_shape(
    api: httpx2.AsyncClient, security: Security, store: Store
) -> None:
    r = await api.post("/api/v1/jobs", json=cron_job("work"))
    assert r.status_code == 201, r.text
    fresh = (await security.tokens.create("fresh", Scope.WRITE)).secret  # not cached yet
    await store.close()  # reading the token now fails (not StoreUnavailable: the catch-all's)
    r = await api.post(URL, json={}, headers={"authorization": f"Bearer {fresh}"})
    assert r.status_code == 500, r.text
    assert error_of(r)["code"] == "internal_error"
