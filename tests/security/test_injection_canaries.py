"""Injection canaries: argv is never read by a shell, names cannot carry paths, quotes or
control characters, and ids and log selectors that look like paths reach nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fixtures.sinks import MemorySink
from tests.fixtures.task_runs import make_task_run
from tests.security.conftest import Clients
from tickwork.core.model import TaskKind
from tickwork.ports import Scope
from tickwork.worker.runners import ShellRunner

API = "/api/v1"
HOSTILE_TEXT = ["$(touch /tmp/tw-pwned)", "`id`", "a; rm -rf /", "x && id", "|id", "$HOME"]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
async def test_argv_is_passed_as_is_never_through_a_shell(text: str) -> None:
    sink = MemorySink()
    result = await ShellRunner().run(
        make_task_run(TaskKind.SHELL, {"argv": ["printf", "%s", text]}), sink, asyncio.Event()
    )
    assert result.ok
    assert "".join(data for stream, data in sink.entries if stream == "stdout") == text


BAD_NAMES = ["../etc", "a/b", "a;b", "a b", "a\nb", "-rf", ".hidden", "naïve", "a" * 129, ""]


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_names_cannot_carry_paths_or_shell_syntax(as_scope: Clients, name: str) -> None:
    admin = as_scope(Scope.ADMIN)
    task: dict[str, Any] = {"kind": "shell", "argv": ["true"]}
    job = {"name": name, "schedule": {"kind": "now"}, "task": task}
    r = await admin.post(f"{API}/jobs", json=job)
    assert (r.status_code, r.json()["error"]["field"]) == (422, "name"), r.text
    r = await admin.post(f"{API}/jobs", json={**job, "name": "ok", "task": {**task, "name": name}})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "task.name"), r.text
    r = await admin.post(f"{API}/tokens", json={"name": name, "scope": "read"})
    assert r.status_code == 422
    assert (await admin.get(f"{API}/jobs")).json()["jobs"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/runs/..%2F..%2Fetc%2Fpasswd",
        "/runs/../../etc/passwd/logs",
        "/runs/%00/logs",
        "/task-runs/..%2Fx/retry",
        "/jobs/..%2F..%2Fetc/trigger",
    ],
)
async def test_path_like_ids_reach_nothing(as_scope: Clients, path: str) -> None:
    admin = as_scope(Scope.ADMIN)
    method = "POST" if path.endswith(("retry", "trigger")) else "GET"
    r = await admin.request(method, f"{API}{path}")
    assert r.status_code in (404, 405, 422), (path, r.status_code, r.text)


async def test_a_log_selector_is_a_task_name_not_a_path(as_scope: Clients) -> None:
    admin = as_scope(Scope.ADMIN)
    job = {"name": "j", "schedule": {"kind": "now"}, "task": {"kind": "shell", "argv": ["true"]}}
    assert (await admin.post(f"{API}/jobs", json=job)).status_code == 201
    (run,) = (await admin.get(f"{API}/runs")).json()["runs"]
    for task in ("../../../../etc/passwd", "/etc/passwd", "main\n"):
        r = await admin.get(f"{API}/runs/{run['id']}/logs", params={"task": task})
        assert (r.status_code, r.json()["error"]["field"]) == (422, "task"), r.text
        assert "root:" not in r.text
