"""PATCH /jobs/{name}, and trigger with params: changes reach future runs only."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from tests.api.conftest import NOW, cron_job, error_of, now_job
from tests.helpers import Wakes

API = "/api/v1"


async def _patch(api: httpx2.AsyncClient, name: str, body: dict[str, Any]) -> httpx2.Response:
    return await api.patch(f"{API}/jobs/{name}", json=body)


async def test_patch_changes_policies_tags_and_metadata(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("c"))
    body = {
        "retry": {"max_attempts": 4},
        "timeout": 30,
        "priority": 7,
        "queue": "gpu",
        "catchup": True,
        "tags": ["etl"],
        "metadata": {"owner": "data"},
    }
    r = await _patch(api, "c", body)
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["retry"]["max_attempts"] == 4
    assert (job["timeout"], job["priority"], job["queue"], job["catchup"]) == (30, 7, "gpu", True)
    assert (job["tags"], job["metadata"]) == (["etl"], {"owner": "data"})
    assert (await _patch(api, "c", {"timeout": None})).json()["timeout"] is None


async def test_patch_cron_schedule_recomputes_next_fire_from_now_and_keeps_pause(
    api: httpx2.AsyncClient, wakes: Wakes
) -> None:
    await api.post(f"{API}/jobs", json=cron_job("c"))
    await api.post(f"{API}/jobs/c/pause")
    before = wakes.count
    schedule = {"kind": "cron", "cron": "0 * * * *", "timezone": "UTC"}
    job = (await _patch(api, "c", {"schedule": schedule})).json()
    assert job["next_fire_at"] == "2026-06-01T13:00:00Z"
    assert job["paused"] is True
    assert wakes.count == before + 1


async def test_patch_tasks_leave_a_run_in_flight_alone(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=now_job("n"))
    task = {"kind": "shell", "argv": ["echo", "new"]}
    assert (await _patch(api, "n", {"task": task})).status_code == 200
    run = (await api.get(f"{API}/runs", params={"job": "n"})).json()["runs"][0]
    detail = (await api.get(f"{API}/runs/{run['id']}")).json()
    assert detail["task_runs"][0]["config"]["argv"] == ["true"]
    later = {"logical_date": "2026-06-02T00:00:00Z"}
    triggered = (await api.post(f"{API}/jobs/n/trigger", json=later)).json()
    assert triggered["task_runs"][0]["config"]["argv"] == ["echo", "new"]


async def test_patch_refuses_bad_input_and_changes_nothing(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("c"))
    before = (await api.get(f"{API}/jobs/c")).json()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "other"}, "name"),
        ({"schedule": {"kind": "cron", "cron": "61 * * * *"}}, "schedule.cron"),
        ({"task": {"kind": "shell"}}, "task"),
        ({"queue": None}, "queue"),
        ({"priority": 1000}, "priority"),
    ]
    for body, field in cases:
        r = await _patch(api, "c", body)
        assert r.status_code == 422, (body, r.text)
        assert (error_of(r)["field"] or "").startswith(field), (body, r.json())
    assert (await api.get(f"{API}/jobs/c")).json() == before
    r = await _patch(api, "nope", {"priority": 1})
    assert r.status_code == 404


async def test_trigger_params_reach_python_kwargs_and_shell_env(api: httpx2.AsyncClient) -> None:
    declared = {"properties": {"day": {"type": "string"}, "n": {"type": "integer"}}}
    await api.post(f"{API}/jobs", json=cron_job("py", params=declared))
    await api.post(f"{API}/jobs", json=now_job("sh", params=declared))
    params = {"day": "2026-05-01", "n": 3}
    py = (await api.post(f"{API}/jobs/py/trigger", json={"params": params})).json()
    assert py["task_runs"][0]["config"]["kwargs"] == params
    body = {"params": params, "logical_date": "2026-05-01T00:00:00Z"}
    sh = (await api.post(f"{API}/jobs/sh/trigger", json=body)).json()
    assert json.loads(sh["task_runs"][0]["config"]["env"]["TICKWORK_PARAMS"]) == params
    assert py["logical_date"][:10] == NOW.isoformat()[:10]
