"""The bad-input catalogue of issue 10 §3: each case is a 4xx naming the field, at save time,
and nothing is created. None of them may be a 5xx (they were: OverflowError, int64
overflow, a runner that crashed later on an env name or a header value)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import Clients
from tickwork.ports import Scope

API = "/api/v1"
LATE, EARLY = "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00"
PY = {"kind": "python", "target": "tests.fixtures.tasks:noop"}
HTTP = {"kind": "http", "url": "https://example.org/hook"}
SHELL = {"kind": "shell", "argv": ["true"]}


def _nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def job(**fields: Any) -> dict[str, Any]:
    return {"name": "bad", "schedule": {"kind": "now"}, "task": PY, **fields}


def cron(**fields: Any) -> dict[str, Any]:
    return job(schedule={"kind": "cron", "cron": "0 3 * * *", **fields})


#: name -> (method, path, {json|params}, the field the error names).
CASES: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "at too late": ("POST", "/jobs", {"json": job(schedule={"kind": "at", "at": LATE})}, "schedule.at"),
    "at too early": ("POST", "/jobs", {"json": job(schedule={"kind": "at", "at": EARLY})}, "schedule.at"),
    "cron start": ("POST", "/jobs", {"json": cron(start=EARLY)}, "schedule.start"),
    "cron end": ("POST", "/jobs", {"json": cron(end=LATE)}, "schedule.end"),
    "preview from": ("GET", "/schedule/preview", {"params": {"cron": "* * * * *", "from": LATE}}, "from"),
    "runs logical_from": ("GET", "/runs", {"params": {"logical_from": LATE}}, "logical_from"),
    "runs started_to": ("GET", "/runs", {"params": {"started_to": EARLY}}, "started_to"),
    "trigger logical_date": ("POST", "/jobs/target/trigger", {"json": {"logical_date": LATE}}, "logical_date"),
    "enqueue at": ("POST", "/jobs/target/runs", {"json": {"at": EARLY}}, "at"),
    "enqueue batch at": ("POST", "/jobs/target/runs/batch", {"json": {"items": [{"at": LATE}]}}, "items[0].at"),
    "max_active_runs 2^63": ("POST", "/jobs", {"json": job(max_active_runs=2**63)}, "max_active_runs"),
    "timeout as text": ("POST", "/jobs", {"json": job(timeout="10")}, "timeout"),
    "priority as text": ("POST", "/jobs", {"json": job(priority="5")}, "priority"),
    "catchup as text": ("POST", "/jobs", {"json": job(catchup="true")}, "catchup"),
    "retry as text": ("POST", "/jobs", {"json": job(retry={"max_attempts": "3"})}, "retry.max_attempts"),
    "patch as text": ("PATCH", "/jobs/target", {"json": {"timeout": "10"}}, "timeout"),
    "metadata too deep": ("POST", "/jobs", {"json": job(metadata=_nest(100))}, "metadata"),
    "param too deep": ("POST", "/jobs/target/trigger", {"json": {"params": {"p": _nest(40)}}}, "params.p"),
    "param undeclared": ("POST", "/jobs/target/runs", {"json": {"params": {"q": 1}}}, "params.q"),
    "param mistyped": ("POST", "/jobs/target/runs", {"json": {"params": {"p": "1"}}}, "params.p"),
    "env name with =": ("POST", "/jobs", {"json": job(task={**SHELL, "env": {"A=B": "x"}})}, "task.env.A=B"),
    "env name empty": ("POST", "/jobs", {"json": job(task={**SHELL, "env": {"": "x"}})}, "task.env."),
    "header non-ASCII": ("POST", "/jobs", {"json": job(task={**HTTP, "headers": {"X-A": "café"}})}, "task.headers.X-A"),
    "header line break": ("POST", "/jobs", {"json": job(task={**HTTP, "headers": {"X-A": "a\r\nB: c"}})}, "task.headers.X-A"),
    "header name": ("POST", "/jobs", {"json": job(task={**HTTP, "headers": {"X A": "x"}})}, "task.headers.X A"),
    "callback header": ("POST", "/jobs", {"json": job(callbacks={"on_failure": {**HTTP, "headers": {"X": "é"}}})}, "callbacks.on_failure.headers.X"),
}  # fmt: skip


@pytest.fixture
async def admin(as_scope: Clients) -> Any:
    client = as_scope(Scope.ADMIN)
    target = job(
        name="target",
        schedule={"kind": "cron", "cron": "0 3 * * *"},
        params={"properties": {"p": {"type": "object"}}},
    )
    r = await client.post(f"{API}/jobs", json=target)
    assert r.status_code == 201, r.text
    return client


@pytest.mark.parametrize("case", list(CASES))
async def test_bad_input_is_a_4xx_naming_the_field_and_creates_nothing(
    admin: Any, case: str
) -> None:
    method, path, request, field = CASES[case]
    before = (await admin.get(f"{API}/jobs/target")).json()
    r = await admin.request(method, f"{API}{path}", **request)
    assert r.status_code == 422, (case, r.text)
    assert r.json()["error"]["field"].startswith(field), (case, r.text)
    assert [j["name"] for j in (await admin.get(f"{API}/jobs")).json()["jobs"]] == ["target"]
    assert (await admin.get(f"{API}/runs")).json()["runs"] == []
    assert (await admin.get(f"{API}/jobs/target")).json() == before


async def test_a_body_nested_beyond_the_json_parser_is_a_4xx(admin: Any) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    for path in ("/jobs", "/jobs/target/runs", "/jobs/target/trigger"):
        r = await admin.post(
            f"{API}{path}", content=deep, headers={"Content-Type": "application/json"}
        )
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])
    assert (await admin.get(f"{API}/runs")).json()["runs"] == []
