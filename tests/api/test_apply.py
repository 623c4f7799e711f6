"""PUT /jobs/{name}: apply a whole definition. Created, updated for future runs, or unchanged."""

from __future__ import annotations

from typing import Any

import httpx2
from fastapi import FastAPI

from tests.api.conftest import cron_job, error_of, now_job
from tests.helpers import FakeClock
from tickwork.api.auth import Security
from tickwork.ports import Scope

API = "/api/v1"


def flow(**job: Any) -> dict[str, Any]:
    body = now_job("flow", **job)
    del body["task"]
    tasks = [
        {"kind": "shell", "name": "a", "argv": ["echo", "a"]},
        {"kind": "http", "name": "b", "url": "https://example.org/b", "method": "post"},
        {"kind": "shell", "name": "c", "argv": ["echo", "c"], "upstream": ["a", "b"]},
    ]
    return {**body, "tasks": tasks}


async def _apply(api: httpx2.AsyncClient, body: dict[str, Any]) -> httpx2.Response:
    return await api.put(f"{API}/jobs/{body['name']}", json=body)


async def _runs(api: httpx2.AsyncClient, job: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = (await api.get(f"{API}/runs", params={"job": job})).json()["runs"]
    return runs


def _config_of(run: dict[str, Any], task: str) -> dict[str, Any]:
    [config] = [tr["config"] for tr in run["task_runs"] if tr["task_name"] == task]
    return config  # type: ignore[no-any-return]


async def test_apply_creates_then_leaves_an_identical_definition_alone(
    api: httpx2.AsyncClient, clock: FakeClock
) -> None:
    r = await _apply(api, flow())
    assert r.status_code == 201, r.text
    assert r.json()["outcome"] == "created"
    created = r.json()["job"]
    assert [t["name"] for t in created["tasks"]] == ["a", "b", "c"]
    assert len(await _runs(api, "flow")) == 1  # a `now` job runs once, on create
    clock.now = clock.now.replace(minute=5)
    r = await _apply(api, flow())
    assert r.status_code == 200, r.text
    assert r.json()["outcome"] == "unchanged"
    assert r.json()["job"] == created
    assert (await api.get(f"{API}/jobs/flow")).json()["updated_at"] == created["updated_at"]
    assert len(await _runs(api, "flow")) == 1


async def test_apply_of_a_changed_definition_updates_future_runs_only(
    api: httpx2.AsyncClient, clock: FakeClock
) -> None:
    assert (await _apply(api, flow())).status_code == 201
    [first] = await _runs(api, "flow")
    changed = flow(priority=3)
    changed["tasks"][0]["argv"] = ["echo", "A"]
    clock.now = clock.now.replace(minute=5)
    r = await _apply(api, changed)
    assert r.status_code == 200, r.text
    assert r.json()["outcome"] == "updated"
    job = r.json()["job"]
    assert (job["priority"], job["tasks"][0]["config"]["argv"]) == (3, ["echo", "A"])
    assert job["updated_at"] == "2026-06-01T12:05:00Z"
    assert len(await _runs(api, "flow")) == 1  # an update of a `now` job starts no run
    detail = (await api.get(f"{API}/runs/{first['id']}")).json()
    assert _config_of(detail, "a")["argv"] == ["echo", "a"]  # the run in flight
    later = {"logical_date": "2026-06-02T00:00:00Z"}
    triggered = (await api.post(f"{API}/jobs/flow/trigger", json=later)).json()
    assert _config_of(triggered, "a")["argv"] == ["echo", "A"]
    assert (await _apply(api, changed)).json()["outcome"] == "unchanged"


async def test_a_definition_spelled_differently_but_equal_is_unchanged(
    api: httpx2.AsyncClient,
) -> None:
    body = cron_job("c", cron="30 2 * * mon")
    assert (await _apply(api, body)).status_code == 201
    respelled = cron_job("c", cron="30  2 * * MON")
    respelled["retry"] = {"max_attempts": 1}  # the default, written out
    respelled["tags"] = []
    r = await _apply(api, respelled)
    assert r.json()["outcome"] == "unchanged", r.text
    assert (await _apply(api, flow())).status_code == 201
    upper = flow()
    upper["tasks"][1]["method"] = "POST"
    assert (await _apply(api, upper)).json()["outcome"] == "unchanged"


async def test_apply_of_a_new_cron_schedule_replans_and_keeps_the_pause(
    api: httpx2.AsyncClient,
) -> None:
    assert (await _apply(api, cron_job("c"))).status_code == 201
    assert (await api.post(f"{API}/jobs/c/pause")).status_code == 200
    body = cron_job("c", cron="0 * * * *", tz="UTC")
    job = (await _apply(api, body)).json()["job"]
    assert (job["next_fire_at"], job["paused"]) == ("2026-06-01T13:00:00Z", True)


async def test_a_bad_definition_is_refused_and_changes_nothing(api: httpx2.AsyncClient) -> None:
    assert (await _apply(api, flow())).status_code == 201
    before = (await api.get(f"{API}/jobs/flow")).json()
    cyclic = flow()
    cyclic["tasks"][0]["upstream"] = ["c"]
    r = await _apply(api, cyclic)
    assert r.status_code == 422, r.text
    assert error_of(r)["message"].startswith("the tasks form a cycle (a -> c -> a)")
    r = await api.put(f"{API}/jobs/other", json=flow())
    assert r.status_code == 422, r.text
    assert error_of(r) == {
        "code": "validation_error",
        "message": "must be the name in the path ('other')",
        "field": "name",
    }
    assert (await api.get(f"{API}/jobs/flow")).json() == before
    assert [j["name"] for j in (await api.get(f"{API}/jobs")).json()["jobs"]] == ["flow"]
    r = await _apply(api, now_job("new", task={"kind": "shell", "argv": []}))
    assert (r.status_code, error_of(r)["field"]) == (422, "task.argv")
    assert (await api.get(f"{API}/jobs/new")).status_code == 404


async def test_apply_needs_admin_for_code_before_or_after(
    api: httpx2.AsyncClient, app: FastAPI, security: Security
) -> None:
    secret = (await security.tokens.create("writer", Scope.WRITE)).secret
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t.test", headers=headers
    ) as writer:
        hook = now_job("hook", task={"kind": "http", "url": "https://example.org/x"})
        assert (await _apply(writer, hook)).status_code == 201
        r = await _apply(writer, flow())  # shell tasks
        assert r.status_code == 403, r.text
        assert (await api.get(f"{API}/jobs/flow")).status_code == 404
        assert (await _apply(api, flow())).status_code == 201
        assert (await _apply(writer, {**hook, "name": "flow"})).status_code == 403
        assert (await _apply(writer, hook)).json()["outcome"] == "unchanged"
