"""The search side over HTTP: job filters, run windows, the dead-letter list."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx2

from tests.api.conftest import at_job, cron_job, error_of, now_job
from tickwork.core.model import Outcome, TaskRunState
from tickwork.ports import Store

API = "/api/v1"


async def _names(api: httpx2.AsyncClient, **params: Any) -> list[str]:
    r = await api.get(f"{API}/jobs", params=params)
    assert r.status_code == 200, r.text
    return [j["name"] for j in r.json()["jobs"]]


async def test_list_jobs_filters_by_prefix_tag_paused_and_kind(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=now_job("etl-a", tags=["nightly"]))
    await api.post(f"{API}/jobs", json=cron_job("etl-b"))
    await api.post(f"{API}/jobs", json=at_job("web"))
    await api.post(f"{API}/jobs/etl-b/pause")
    assert await _names(api, prefix="etl-") == ["etl-a", "etl-b"]
    assert await _names(api, tag="nightly") == ["etl-a"]
    assert await _names(api, paused="true") == ["etl-b"]
    assert await _names(api, paused="false", prefix="etl") == ["etl-a"]
    assert await _names(api, schedule_kind="at") == ["web"]


async def test_list_jobs_refuses_an_unknown_schedule_kind(api: httpx2.AsyncClient) -> None:
    r = await api.get(f"{API}/jobs", params={"schedule_kind": "weekly"})
    assert (r.status_code, error_of(r)["field"]) == (422, "schedule_kind")


async def test_list_runs_by_logical_date_window(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("c"))
    for day in (1, 2, 3, 4):
        body = {"logical_date": f"2026-05-0{day}T00:00:00Z"}
        assert (await api.post(f"{API}/jobs/c/trigger", json=body)).status_code == 201
    window = {"logical_from": "2026-05-02T00:00:00Z", "logical_to": "2026-05-04T00:00:00Z"}
    runs = (await api.get(f"{API}/runs", params=window)).json()["runs"]
    assert [r["logical_date"][:10] for r in runs] == ["2026-05-03", "2026-05-02"]
    none_started = {"started_from": "2026-01-01T00:00:00Z"}
    assert (await api.get(f"{API}/runs", params=none_started)).json()["runs"] == []


async def test_list_runs_refuses_a_naive_instant(api: httpx2.AsyncClient) -> None:
    r = await api.get(f"{API}/runs", params={"logical_from": "2026-05-02T00:00:00"})
    assert (r.status_code, error_of(r)["field"]) == (422, "logical_from")


async def test_dead_letters_lists_failed_task_runs_with_their_run(
    api: httpx2.AsyncClient, store: Store
) -> None:
    await api.post(f"{API}/jobs", json=now_job("a"))
    await api.post(f"{API}/jobs", json=now_job("b"))
    run = (await api.get(f"{API}/runs", params={"job": "a"})).json()["runs"][0]
    task_run = (await api.get(f"{API}/runs/{run['id']}")).json()["task_runs"][0]
    started = await store.claim([(task_run["id"], 1)], "w1", _now(run))
    assert len(started) == 1
    failed = Outcome(task_run["id"], 1, TaskRunState.FAILED, _now(run), error="boom")
    assert (await store.complete([failed])).applied == [task_run["id"]]
    page = (await api.get(f"{API}/dead-letters")).json()
    assert [(d["job_name"], d["run_id"], d["error"]) for d in page["task_runs"]] == [
        ("a", run["id"], "boom")
    ]
    assert page["next_cursor"] is None
    assert (await api.get(f"{API}/dead-letters", params={"job": "b"})).json()["task_runs"] == []
    r = await api.get(f"{API}/dead-letters", params={"job": "nope"})
    assert r.status_code == 404


def _now(run: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(run["created_at"])
