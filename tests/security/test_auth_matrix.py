"""The auth matrix by job kind: every route of the OpenAPI document by read/write/admin by the
kind of job it touches.

A route's rule is its router's scope (``tests/api/test_auth.py``'s ``RULES``) unless it acts
on a job or its runs; then what the job runs decides (``tickwork.api.access``). A new route
must be classified here (``JOB_ROUTES`` or the static rules), or this fails. A refused call
must change nothing: the job and its runs read the same before and after.
"""

from __future__ import annotations

import re
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from tests.api.test_auth import PUBLIC, RULES
from tests.security.conftest import Clients
from tickwork.ports import Scope

API = "/api/v1"
HTTP = {"kind": "http", "url": "https://example.org/hook"}
SHELL = {"kind": "shell", "argv": ["/bin/date"]}
PYTHON = {"kind": "python", "target": "subprocess:check_output", "kwargs": {"args": ["/bin/date"]}}
PY_HOOK = {"on_failure": {"kind": "python", "target": "tests.fixtures.tasks:noop"}}
OPEN = {"properties": {"n": {"type": "integer"}}, "scope": "write"}

#: Job kind -> (job body fields, scope to manage it, scope to run it).
KINDS: dict[str, tuple[dict[str, Any], Scope, Scope]] = {
    "http": ({"task": HTTP}, Scope.WRITE, Scope.WRITE),
    "shell": ({"task": SHELL}, Scope.ADMIN, Scope.ADMIN),
    "python": ({"task": PYTHON}, Scope.ADMIN, Scope.ADMIN),
    "http+python-callback": ({"task": HTTP, "callbacks": PY_HOOK}, Scope.ADMIN, Scope.ADMIN),
    "python, params.scope write": ({"task": PYTHON, "params": OPEN}, Scope.ADMIN, Scope.WRITE),
}
#: Routes that act on a job or its runs -> which of its scopes they need ("save": the
#: body's job is saved, "run-of": acting on a run, which the job's run scope allows).
JOB_ROUTES: dict[tuple[str, str], str] = {
    ("POST", f"{API}/jobs"): "save",
    ("POST", f"{API}/jobs/batch"): "save",
    ("PUT", f"{API}/jobs/{{name}}"): "save",
    ("PATCH", f"{API}/jobs/{{name}}"): "manage",
    ("DELETE", f"{API}/jobs/{{name}}"): "manage",
    ("POST", f"{API}/jobs/{{name}}/pause"): "manage",
    ("POST", f"{API}/jobs/{{name}}/resume"): "manage",
    ("POST", f"{API}/jobs/{{name}}/trigger"): "run",
    ("POST", f"{API}/jobs/{{name}}/runs"): "run",
    ("POST", f"{API}/jobs/{{name}}/runs/batch"): "run",
    ("POST", f"{API}/runs/{{run_id}}/cancel"): "run-of",
    ("POST", f"{API}/runs/{{run_id}}/retry"): "run-of",
    ("POST", f"{API}/runs/{{run_id}}/replay"): "run-of",
    ("POST", f"{API}/task-runs/{{task_run_id}}/cancel"): "run-of",
    ("POST", f"{API}/task-runs/{{task_run_id}}/retry"): "run-of",
}
_COUNTER = iter(range(1_000_000))


def operations(app: FastAPI) -> list[tuple[str, str]]:
    paths: dict[str, dict[str, Any]] = app.openapi()["paths"]
    return sorted((m.upper(), p) for p, item in paths.items() for m in item)


def test_every_route_is_classified(app: FastAPI) -> None:
    missing = [op for op in operations(app) if op not in RULES and op not in PUBLIC]
    assert missing == []
    job_paths = [op for op in operations(app) if "{name}" in op[1] and "/jobs/" in op[1]]
    reads = {op for op in job_paths if op[0] == "GET"}
    assert [op for op in job_paths if op not in JOB_ROUTES and op not in reads] == []


def _job_body(name: str, kind: str) -> dict[str, Any]:
    fields, _, _ = KINDS[kind]
    return {"name": name, "schedule": {"kind": "now"}, **fields}


async def _setup(admin: httpx2.AsyncClient, kind: str) -> dict[str, str]:
    name = f"j{next(_COUNTER)}"
    r = await admin.post(f"{API}/jobs", json=_job_body(name, kind))
    assert r.status_code == 201, r.text
    runs = (await admin.get(f"{API}/runs", params={"job": name})).json()["runs"]
    run = (await admin.get(f"{API}/runs/{runs[0]['id']}")).json()
    return {"name": name, "run_id": run["id"], "task_run_id": run["task_runs"][0]["id"]}


def _request(method: str, path: str, ids: dict[str, str], kind: str) -> dict[str, Any]:
    url = re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "nope"), path)
    body: Any = None
    if path.endswith("/jobs"):
        body = _job_body(f"new{next(_COUNTER)}", kind)
    elif path.endswith("/jobs/batch"):
        body = {"jobs": [_job_body(f"new{next(_COUNTER)}", kind)]}
    elif method == "PUT" and "{name}" in path and "/jobs/" in path:
        body = {**_job_body(ids["name"], kind), "priority": 5}
    elif method == "PATCH":
        body = {"priority": 5}
    elif path.endswith("/runs/batch"):
        body = {"items": [{}]}
    elif path.endswith("/tokens"):
        body = {"name": f"x{next(_COUNTER)}", "scope": "read"}
    elif method in ("POST", "PUT"):
        body = {}
    return {"method": method, "url": url, "json": body}


def _needed(op: tuple[str, str], kind: str) -> Scope:
    what = JOB_ROUTES.get(op)
    _, manage, run = KINDS[kind]
    if what is None:
        return RULES[op]
    if what == "run-of":
        return run if run is Scope.WRITE else manage
    return run if what == "run" else manage


async def _snapshot(admin: httpx2.AsyncClient, name: str) -> Any:
    job = (await admin.get(f"{API}/jobs/{name}")).json()
    runs = (await admin.get(f"{API}/runs", params={"job": name})).json()
    jobs = (await admin.get(f"{API}/jobs")).json()["jobs"]
    return job, runs, sorted(j["name"] for j in jobs)


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_route_by_scope_and_job_kind(
    app: FastAPI, as_scope: Clients, kind: str
) -> None:
    admin = as_scope(Scope.ADMIN)
    cases = 0
    shared: dict[str, str] | None = None
    for op in operations(app):
        if op in PUBLIC:
            continue
        # One job per route: the scopes go from least to most, and refused calls change
        # nothing (checked), so each allowed call still finds the job as set up.
        # Routes that touch no job share one.
        if shared is None or op in JOB_ROUTES:
            ids = shared = await _setup(admin, kind)
        for scope in Scope:
            allowed = scope.allows(_needed(op, kind))
            before = None if allowed else await _snapshot(admin, ids["name"])
            r = await as_scope(scope).request(**_request(*op, ids, kind))
            case = f"{op} as {scope} on a {kind} job: {r.status_code} {r.text[:300]}"
            if allowed:
                assert r.status_code not in (401, 403) and r.status_code < 500, case
            else:
                assert r.status_code == 403, case
                assert await _snapshot(admin, ids["name"]) == before, case
            cases += 1
    assert cases == 3 * len([op for op in operations(app) if op not in PUBLIC])
