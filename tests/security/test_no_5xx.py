"""Property: no request body or query built from the API's schemas, with any one value
replaced by a hostile one, gets a 5xx.

The bodies start from valid requests of every write route (each kind of task and schedule,
params, callbacks, enqueue, trigger, patch) and from the read routes' filters; hypothesis
picks a leaf (or a whole object) and puts in its place an extreme instant, a huge or
negative number, a number as text, odd text (non-ASCII, NUL, line breaks), a deep nest, or
a value of another JSON type. Schemathesis (``tests/api/schema/``) explores the
document itself; this one aims at the values that broke the runtime before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.security.conftest import Clients
from tickwork.ports import Scope

API = "/api/v1"
SHELL = {"kind": "shell", "argv": ["true"], "env": {"A": "b"}, "cwd": "/tmp", "timeout": 5}
HTTP = {"kind": "http", "url": "https://example.org/x", "headers": {"X-A": "b"}, "body": {"k": 1}}
PY = {"kind": "python", "target": "tests.fixtures.tasks:noop", "kwargs": {"k": [1, "2"]}}
JOB = {
    "name": "h",
    "schedule": {"kind": "cron", "cron": "0 3 * * *", "timezone": "UTC", "start": "2026-01-01T00:00:00Z"},
    "tasks": [{**PY, "name": "a"}, {**SHELL, "name": "b", "upstream": ["a"]}, {**HTTP, "name": "c"}],
    "retry": {"max_attempts": 2, "initial_delay": 1.0},
    "max_active_runs": 2,
    "priority": 1,
    "tags": ["t"],
    "metadata": {"m": {"n": [1]}},
    "callbacks": {"on_failure": {"kind": "http", "url": "https://example.org/h"}},
    "params": {"properties": {"p": {"type": "integer", "default": 1}}, "scope": "write"},
}  # fmt: skip
#: (method, path, body or query, where the value goes)
REQUESTS: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/jobs", JOB, "json"),
    ("POST", "/jobs", {**JOB, "schedule": {"kind": "at", "at": "2027-01-01T00:00:00Z"}}, "json"),
    ("POST", "/jobs/batch", {"jobs": [JOB]}, "json"),
    ("PUT", "/jobs/h", JOB, "json"),
    ("PATCH", "/jobs/target", {"timeout": 3, "max_active_runs": 1, "priority": 2}, "json"),
    ("POST", "/jobs/target/trigger", {"logical_date": "2026-01-01T00:00:00Z", "params": {"p": 1}}, "json"),
    ("POST", "/jobs/target/runs", {"params": {"p": 1}, "priority": 1, "delay": 1.0}, "json"),
    ("POST", "/jobs/target/runs/batch", {"items": [{"params": {"p": 1}, "at": "2026-07-01T00:00:00Z"}]}, "json"),
    ("GET", "/runs", {"logical_from": "2026-01-01T00:00:00Z", "started_to": "2026-01-02T00:00:00Z", "limit": 5}, "params"),
    ("GET", "/schedule/preview", {"cron": "* * * * *", "from": "2026-01-01T00:00:00Z", "count": 3}, "params"),
    ("GET", "/jobs", {"limit": 5, "prefix": "t", "paused": "true"}, "params"),
    ("PUT", "/pools/p", {"slots": 3, "description": "d"}, "json"),
]  # fmt: skip

HOSTILE = st.one_of(
    st.sampled_from(
        [
            "9999-12-31T23:59:59-05:00",
            "0001-01-01T00:00:00+05:00",
            "10000-01-01T00:00:00Z",
            2**63,
            -(2**63) - 1,
            2**1000,
            -1,
            0,
            1e308,
            "10",
            "true",
            "",
            "\x00",
            "a\r\nb: c",
            "café",
            "A=B",
            None,
            [],
            {},
            {"$secret": "nope"},
            {"$result": "nope"},
        ]
    ),
    st.text(max_size=20),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.recursive(st.none() | st.integers(), lambda c: st.lists(c, max_size=2), max_leaves=40),
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return copy


@st.composite
def hostile_requests(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    method, path, base, where = draw(st.sampled_from(REQUESTS))
    spot = draw(st.sampled_from(list(_paths(base))[1:]))
    value = draw(HOSTILE)
    changed = _replace(base, spot, value)
    if where == "params":
        query = {k: v if isinstance(v, str) else json.dumps(v) for k, v in changed.items()}
        return method, path, {"params": query}
    return method, path, {"json": changed}


@pytest.fixture
async def admin(as_scope: Clients) -> httpx2.AsyncClient:
    client = as_scope(Scope.ADMIN)
    target = {**JOB, "name": "target"}
    assert (await client.post(f"{API}/jobs", json=target)).status_code == 201
    assert (await client.put(f"{API}/pools/p", json={"slots": 3})).status_code in (200, 201)
    return client


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=hostile_requests())
async def test_no_hostile_value_gets_a_5xx(
    admin: httpx2.AsyncClient, request: tuple[str, str, dict[str, Any]]
) -> None:
    method, path, kwargs = request
    r = await admin.request(method, f"{API}{path}", **kwargs)
    assert r.status_code < 500, (method, path, kwargs, r.status_code, r.text[:300])
