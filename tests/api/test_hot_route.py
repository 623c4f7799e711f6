"""The enqueue route's lean handler (``api/hot.py``) and the fast path ahead of the middleware
(``api/fast_path.py``): they answer plain requests themselves and every other request exactly
as FastAPI's own handler does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI, Request, Response

from tests.api.conftest import cron_job
from tickwork.api import hot
from tickwork.api.app import _ROUTERS, create_app
from tickwork.api.auth import Security
from tickwork.api.fast_path import EnqueueFastPath
from tickwork.api.idempotency import IdempotentRoute
from tickwork.api.limits import DEFAULT_MAX_BODY
from tickwork.api.routers import write
from tickwork.app.services import Services
from tickwork.ports import Scope

URL = "/api/v1/jobs/work/runs"
JSON = {"content-type": "application/json"}
#: (what, path, extra headers, body): requests the lean handler must answer as FastAPI does.
ODD: list[tuple[str, str, dict[str, str], bytes | None]] = [
    ("plain", URL, JSON, b'{"params": {"n": 1}}'),
    ("no body", URL, {}, None),
    ("+json type", URL, {"content-type": "application/merge-patch+json"}, b'{"priority": 5}'),
    ("no content type", URL, {"content-type": ""}, b"{}"),
    ("text type", URL, {"content-type": "text/plain"}, b"{}"),
    ("bad JSON", URL, JSON, b'{"params": '),
    ("not UTF-8", URL, JSON, b'{"params": "\xff"}'),
    ("null", URL, JSON, b"null"),
    ("a list", URL, JSON, b"[1]"),
    ("unknown field", URL, JSON, b'{"when": 1}'),
    ("strict priority", URL, JSON, b'{"priority": true}'),
    ("at and delay", URL, JSON, b'{"at": "2027-01-01T00:00:00Z", "delay": 1}'),
    ("params contract", URL, JSON, b'{"params": {"n": "one"}}'),
    ("undeclared param", URL, JSON, b'{"params": {"zz": 1}}'),
    ("unknown job", "/api/v1/jobs/nope/runs", JSON, b"{}"),
    ("NUL in name", "/api/v1/jobs/wo%00rk/runs", JSON, b"{}"),
    ("a query", URL + "?x=1", JSON, b"{}"),
    ("a repeated query", URL + "?x=1&x=2", JSON, b"{}"),
    ("no token", URL, {"authorization": ""}, b"{}"),
    ("bad token", URL, {"authorization": "Bearer tw_nope_x"}, b"{}"),
    ("read token", URL, {"authorization": "READ"}, b"{}"),
    ("key too long", URL, {**JSON, "idempotency-key": "k" * 300}, b"{}"),
    ("a key", URL, {**JSON, "idempotency-key": "k-1"}, b'{"params": {"n": 1}}'),
    ("over the body limit", URL, JSON, b'{"params": {"n": 1}}' + b" " * DEFAULT_MAX_BODY),
    ("at the body limit", URL, JSON, b"{}" + b" " * (DEFAULT_MAX_BODY - 2)),
    (
        "a job needing admin",
        "/api/v1/jobs/admin-only/runs",
        {**JSON, "authorization": "WRITE"},
        b"{}",
    ),
]


@pytest.fixture
def full_app(services: Services, security: Security, monkeypatch: pytest.MonkeyPatch) -> FastAPI:
    """The same API with FastAPI's handler only, as it was before the lean one and the fast
    path."""
    monkeypatch.setattr(hot.HotRoute, "request_handler", IdempotentRoute.request_handler)
    app = create_app(services, security=security)
    fast: Any = EnqueueFastPath
    app.user_middleware = [m for m in app.user_middleware if m.cls is not fast]
    return app


@pytest.fixture
async def clients(
    app: FastAPI, full_app: FastAPI, admin_token: str, security: Security
) -> AsyncIterator[tuple[httpx2.AsyncClient, httpx2.AsyncClient, dict[str, str]]]:
    read = (await security.tokens.create("reader", Scope.READ)).secret
    write_token = (await security.tokens.create("writer", Scope.WRITE)).secret
    headers = {"Authorization": f"Bearer {admin_token}"}
    async with (
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), headers=headers,
                           base_url="http://tickwork.test") as lean,
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=full_app), headers=headers,
                           base_url="http://tickwork.test") as full,
    ):  # fmt: skip
        params = {"properties": {"n": {"type": "integer"}}}
        r = await lean.post("/api/v1/jobs", json={**cron_job("work"), "params": params})
        assert r.status_code == 201, r.text
        r = await lean.post("/api/v1/jobs", json=cron_job("admin-only"))  # a python task
        assert r.status_code == 201, r.text
        yield lean, full, {"READ": read, "WRITE": write_token}


def _shape(r: httpx2.Response) -> tuple[int, Any, str | None]:
    body: Any = r.json()
    if 200 <= r.status_code < 300:  # new ids each time: compare the shape
        body = sorted(body)
    return r.status_code, body, r.headers.get("www-authenticate")


@pytest.mark.parametrize(("what", "path", "headers", "body"), ODD, ids=[o[0] for o in ODD])
async def test_the_lean_handler_answers_as_fastapis_does(
    clients: tuple[httpx2.AsyncClient, httpx2.AsyncClient, dict[str, str]],
    what: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
) -> None:
    lean, full, tokens = clients
    if headers.get("authorization") in tokens:
        headers = {**headers, "authorization": f"Bearer {tokens[headers['authorization']]}"}
    answers = [
        _shape(await client.post(path, headers=headers, content=body)) for client in (lean, full)
    ]
    assert answers[0] == answers[1], what


def _request(app: FastAPI, token: str, body: bytes) -> Request:
    headers = [
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
    ]
    scope = {
        "type": "http", "method": "POST", "path": URL, "query_string": b"", "headers": headers,
        "path_params": {"name": "work"}, "app": app, "state": {},
    }  # fmt: skip

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


async def test_plain_requests_never_reach_fastapis_handler(
    clients: tuple[httpx2.AsyncClient, httpx2.AsyncClient, dict[str, str]],
    app: FastAPI,
    admin_token: str,
) -> None:
    handed: list[bytes] = []

    async def full(request: Request) -> Response:
        handed.append(await request.body())
        return Response(status_code=299)

    handler = hot.lean_enqueue(full)
    plain = (b"", b"{}", b'{"params": {"n": 2}, "priority": 3, "delay": 0}')
    for body in plain:
        r = await handler(_request(app, admin_token, body))
        assert r.status_code == 201, body
    assert handed == []
    assert (await handler(_request(app, admin_token, b'{"priority": "high"}'))).status_code == 299


def test_the_hot_route_needs_the_scope_of_its_router() -> None:
    assert (write.router, ("write", "all"), hot.SCOPE) in _ROUTERS
