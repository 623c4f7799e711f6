"""The auth matrix: every route of the app by (no token, read, write, admin).

Routes come from the app's OpenAPI document; each needs a rule in ``RULES`` (or to be in
``PUBLIC``), so a new route without one fails here.
"""

from __future__ import annotations

import re
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from tests.api.conftest import error_of, now_job
from tickwork.api.auth import Security
from tickwork.ports import Scope

PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/livez"), ("GET", "/metrics")}
#: Served by FastAPI itself, not part of the spec: documentation only, no data.
UNDOCUMENTED_PUBLIC = {
    "/api/v1/openapi.json",
    "/api/v1/docs",
    "/api/v1/docs/oauth2-redirect",
    "/api/v1/docs/static",
}

RULES: dict[tuple[str, str], Scope] = {
    ("GET", "/api/v1/jobs"): Scope.READ,
    ("GET", "/api/v1/jobs/{name}"): Scope.READ,
    ("GET", "/api/v1/jobs/{name}/upcoming"): Scope.READ,
    ("GET", "/api/v1/runs"): Scope.READ,
    ("GET", "/api/v1/runs/{run_id}"): Scope.READ,
    ("GET", "/api/v1/runs/{run_id}/logs"): Scope.READ,
    ("GET", "/api/v1/schedule/preview"): Scope.READ,
    ("GET", "/api/v1/dead-letters"): Scope.READ,
    ("GET", "/api/v1/status"): Scope.READ,
    ("POST", "/api/v1/jobs"): Scope.WRITE,
    ("POST", "/api/v1/jobs/batch"): Scope.WRITE,
    ("PATCH", "/api/v1/jobs/{name}"): Scope.WRITE,
    ("PUT", "/api/v1/jobs/{name}"): Scope.WRITE,
    ("DELETE", "/api/v1/jobs/{name}"): Scope.WRITE,
    ("POST", "/api/v1/jobs/{name}/trigger"): Scope.WRITE,
    ("POST", "/api/v1/jobs/{name}/runs"): Scope.WRITE,
    ("POST", "/api/v1/jobs/{name}/runs/batch"): Scope.WRITE,
    ("POST", "/api/v1/jobs/{name}/pause"): Scope.WRITE,
    ("POST", "/api/v1/jobs/{name}/resume"): Scope.WRITE,
    ("POST", "/api/v1/runs/{run_id}/cancel"): Scope.WRITE,
    ("POST", "/api/v1/runs/{run_id}/retry"): Scope.WRITE,
    ("POST", "/api/v1/runs/{run_id}/replay"): Scope.WRITE,
    ("POST", "/api/v1/task-runs/{task_run_id}/cancel"): Scope.WRITE,
    ("POST", "/api/v1/task-runs/{task_run_id}/retry"): Scope.WRITE,
    ("POST", "/api/v1/tokens"): Scope.ADMIN,
    ("GET", "/api/v1/tokens"): Scope.ADMIN,
    ("DELETE", "/api/v1/tokens/{token}"): Scope.ADMIN,
    ("GET", "/api/v1/audit"): Scope.READ,
    ("GET", "/api/v1/backfills"): Scope.READ,
    ("GET", "/api/v1/backfills/{backfill_id}"): Scope.READ,
    ("GET", "/api/v1/backfills/{backfill_id}/dates"): Scope.READ,
    ("POST", "/api/v1/backfills"): Scope.WRITE,
    ("POST", "/api/v1/backfills/plan"): Scope.WRITE,
    ("POST", "/api/v1/backfills/{backfill_id}/cancel"): Scope.WRITE,
    ("POST", "/api/v1/backfills/{backfill_id}/pause"): Scope.WRITE,
    ("POST", "/api/v1/backfills/{backfill_id}/resume"): Scope.WRITE,
    ("GET", "/api/v1/runs/{run_id}/why"): Scope.READ,
    ("GET", "/api/v1/jobs/{name}/why"): Scope.READ,
    ("GET", "/api/v1/jobs/{name}/ledger"): Scope.READ,
    ("GET", "/api/v1/pools"): Scope.READ,
    ("GET", "/api/v1/pools/{name}"): Scope.READ,
    ("PUT", "/api/v1/pools/{name}"): Scope.ADMIN,
    ("DELETE", "/api/v1/pools/{name}"): Scope.ADMIN,
    ("PUT", "/api/v1/secrets/{name}"): Scope.ADMIN,
    ("GET", "/api/v1/secrets"): Scope.ADMIN,
    ("DELETE", "/api/v1/secrets/{name}"): Scope.ADMIN,
}
AUTH_STATUSES = {401, 403}


@pytest.fixture
async def secrets(security: Security) -> dict[Scope | None, str | None]:
    made = {scope: await security.tokens.create(f"t-{scope}", scope) for scope in Scope}
    return {None: None, **{scope: issued.secret for scope, issued in made.items()}}


def operations(app: FastAPI) -> set[tuple[str, str]]:
    paths: dict[str, dict[str, Any]] = app.openapi()["paths"]
    return {(method.upper(), path) for path, item in paths.items() for method in item}


def test_every_route_has_an_auth_rule(app: FastAPI) -> None:
    ops = operations(app)
    missing = sorted(ops - set(RULES) - PUBLIC)
    assert missing == [], f"routes without a rule in RULES: {missing}"
    documented = {path for _, path in ops}
    for route in app.routes:  # routes added to the app itself, outside the routers
        path = getattr(route, "path", None)
        assert path is None or path in documented or path in UNDOCUMENTED_PUBLIC, path
        if isinstance(route, APIRoute):
            assert route.include_in_schema or path in UNDOCUMENTED_PUBLIC, route.path


async def _call(app: FastAPI, method: str, path: str, secret: str | None) -> httpx2.Response:
    url = re.sub(r"\{[^}]+\}", "nope", path)
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    body = {"name": "x", "scope": "read"} if path.endswith("/tokens") else {}
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://t.test") as client:
        return await client.request(method, url, headers=headers, json=body)


async def test_auth_matrix(app: FastAPI, secrets: dict[Scope | None, str | None]) -> None:
    seen: list[str] = []
    for method, path in sorted(operations(app)):
        for scope, secret in secrets.items():
            r = await _call(app, method, path, secret)
            case = f"{method} {path} as {scope}: {r.status_code} {r.text[:200]}"
            seen.append(case)
            if (method, path) in PUBLIC:
                assert r.status_code not in AUTH_STATUSES, case
            elif scope is None:
                assert r.status_code == 401, case
                assert r.headers["www-authenticate"] == "Bearer", case
                assert error_of(r)["code"] == "unauthorized", case
            elif not scope.allows(RULES[(method, path)]):
                assert r.status_code == 403, case
                assert error_of(r)["code"] == "forbidden", case
            else:
                assert r.status_code not in AUTH_STATUSES, case
                assert r.status_code < 500, case
    assert len(seen) == 4 * len(operations(app))


@pytest.mark.parametrize(
    "header",
    [
        "Bearer tw_000000000000_" + "A" * 43,
        "Bearer nonsense",
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "bearer ",
    ],
)
async def test_bad_tokens_are_401(app: FastAPI, header: str) -> None:
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://t.test") as client:
        r = await client.get("/api/v1/jobs", headers={"Authorization": header})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


async def test_a_tampered_secret_is_refused(app: FastAPI, admin_token: str) -> None:
    tampered = admin_token[:-1] + ("A" if admin_token[-1] != "A" else "B")
    r = await _call(app, "GET", "/api/v1/jobs", tampered)
    assert r.status_code == 401


def _job(name: str, task: dict[str, Any]) -> dict[str, Any]:
    return now_job(name, task=task)


SHELL = {"kind": "shell", "argv": ["true"]}
PYTHON = {"kind": "python", "target": "tests.fixtures.tasks:noop"}
HTTP = {"kind": "http", "url": "https://example.org/health"}


@pytest.mark.parametrize(
    ("scope", "task", "expected"),
    [
        (Scope.WRITE, HTTP, 201),
        (Scope.WRITE, SHELL, 403),
        (Scope.WRITE, PYTHON, 403),
        (Scope.ADMIN, SHELL, 201),
        (Scope.ADMIN, PYTHON, 201),
        (Scope.READ, HTTP, 403),
    ],
)
async def test_code_tasks_need_admin(
    app: FastAPI,
    secrets: dict[Scope | None, str | None],
    scope: Scope,
    task: dict[str, Any],
    expected: int,
) -> None:
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {secrets[scope]}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t.test", headers=headers
    ) as client:
        r = await client.post("/api/v1/jobs", json=_job("j", task))
        assert r.status_code == expected, r.text
        batch = {"jobs": [_job("a", HTTP), _job("b", task)]}
        r = await client.post("/api/v1/jobs/batch", json=batch)
        assert r.status_code == expected, r.text
        if expected == 403 and scope is Scope.WRITE:
            assert "needs an `admin` token to save" in error_of(r)["message"]
            assert (await client.get("/api/v1/jobs")).json()["jobs"] == []


async def test_readyz_answers_without_a_token(app: FastAPI) -> None:
    r = await _call(app, "GET", "/readyz", None)
    assert r.status_code == 200
    assert r.json()["status"] == "ready"


async def test_patch_of_a_code_job_or_into_one_needs_admin(
    api: httpx2.AsyncClient, app: FastAPI, secrets: dict[Scope | None, str | None]
) -> None:
    assert (await api.post("/api/v1/jobs", json=_job("web", HTTP))).status_code == 201
    assert (await api.post("/api/v1/jobs", json=_job("sh", SHELL))).status_code == 201
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {secrets[Scope.WRITE]}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t.test", headers=headers
    ) as writer:
        assert (await writer.patch("/api/v1/jobs/web", json={"priority": 3})).status_code == 200
        r = await writer.patch("/api/v1/jobs/web", json={"task": SHELL})
        assert r.status_code == 403, r.text
        r = await writer.patch("/api/v1/jobs/sh", json={"priority": 3})
        assert r.status_code == 403, r.text
    assert (await api.patch("/api/v1/jobs/web", json={"task": SHELL})).status_code == 200
