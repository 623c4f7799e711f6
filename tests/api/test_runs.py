"""The runs endpoints: list, show, cancel, retry, logs; plus preview, health and OpenAPI."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from tests.api.conftest import NOW, at_job, cron_job, error_of, now_job
from tests.helpers import Wakes
from tickwork.core.errors import StoreUnavailable
from tickwork.core.model import LogChunk
from tickwork.ports import Store

API = "/api/v1"


async def _run_of(api: httpx2.AsyncClient, job: str) -> dict[str, Any]:
    runs = (await api.get(f"{API}/runs", params={"job": job})).json()["runs"]
    assert len(runs) == 1
    detail: dict[str, Any] = (await api.get(f"{API}/runs/{runs[0]['id']}")).json()
    return detail


async def test_list_runs_filters_by_job_and_state(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=now_job("a"))
    await api.post(f"{API}/jobs", json=at_job("b"))
    by_job = (await api.get(f"{API}/runs", params={"job": "a"})).json()["runs"]
    assert [r["job_name"] for r in by_job] == ["a"]
    scheduled = (await api.get(f"{API}/runs", params={"state": "scheduled"})).json()["runs"]
    assert [r["job_name"] for r in scheduled] == ["b"]
    assert (await api.get(f"{API}/runs", params={"state": "dead"})).json()["runs"] == []


async def test_list_runs_of_an_unknown_job_is_404(api: httpx2.AsyncClient) -> None:
    r = await api.get(f"{API}/runs", params={"job": "nope"})
    assert r.status_code == 404
    assert error_of(r)["field"] == "job"


async def test_list_runs_paginates_with_the_cursor(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("c"))
    for day in (1, 2, 3):
        body = {"logical_date": f"2026-05-0{day}T00:00:00Z"}
        assert (await api.post(f"{API}/jobs/c/trigger", json=body)).status_code == 201
    first = (await api.get(f"{API}/runs", params={"limit": 2})).json()
    assert [r["logical_date"][:10] for r in first["runs"]] == ["2026-05-03", "2026-05-02"]
    assert first["next_cursor"]
    rest = (await api.get(f"{API}/runs", params={"cursor": first["next_cursor"]})).json()
    assert [r["logical_date"][:10] for r in rest["runs"]] == ["2026-05-01"]


async def test_get_run_shows_task_runs_or_404(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=now_job("a"))
    run = await _run_of(api, "a")
    assert run["job_name"] == "a"
    assert isinstance(run["task_runs"], list) and len(run["task_runs"]) == 1
    assert run["attempts"] == []
    r = await api.get(f"{API}/runs/does-not-exist")
    assert (r.status_code, error_of(r)["code"]) == (404, "not_found")


async def test_cancel_a_queued_run_cancels_it_and_a_second_cancel_conflicts(
    api: httpx2.AsyncClient,
) -> None:
    await api.post(f"{API}/jobs", json=now_job("a"))
    run = await _run_of(api, "a")
    r = await api.post(f"{API}/runs/{run['id']}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "cancelled"
    assert r.json()["task_runs"][0]["state"] == "cancelled"
    again = await api.post(f"{API}/runs/{run['id']}/cancel")
    assert (again.status_code, error_of(again)["code"]) == (409, "conflict")
    assert (await api.post(f"{API}/runs/nope/cancel")).status_code == 404


async def test_retry_a_cancelled_run_schedules_it_again_and_wakes_the_scheduler(
    api: httpx2.AsyncClient, wakes: Wakes
) -> None:
    await api.post(f"{API}/jobs", json=now_job("a"))
    run = await _run_of(api, "a")
    await api.post(f"{API}/runs/{run['id']}/cancel")
    before = wakes.count
    r = await api.post(f"{API}/runs/{run['id']}/retry")
    assert r.status_code == 200, r.text
    task_run = r.json()["task_runs"][0]
    assert (task_run["state"], task_run["attempt"]) == ("scheduled", 2)
    assert wakes.count == before + 1


async def test_retry_a_run_with_nothing_to_retry_conflicts(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=now_job("a"))
    run = await _run_of(api, "a")
    r = await api.post(f"{API}/runs/{run['id']}/retry")
    assert (r.status_code, error_of(r)["code"]) == (409, "conflict")
    assert (await api.post(f"{API}/runs/nope/retry")).status_code == 404


async def test_logs_page_through_chunks_with_after_seq(
    api: httpx2.AsyncClient, store: Store
) -> None:
    await api.post(f"{API}/jobs", json=now_job("a"))
    run = await _run_of(api, "a")
    task_run_id = run["task_runs"][0]["id"]
    await store.append_logs(
        [LogChunk(task_run_id, 1, seq, "stdout", f"line {seq}\n", NOW) for seq in range(3)]
    )
    page = (await api.get(f"{API}/runs/{run['id']}/logs", params={"limit": 2})).json()
    assert [c["data"] for c in page["chunks"]] == ["line 0\n", "line 1\n"]
    assert (page["task_run_id"], page["next_after_seq"]) == (task_run_id, 1)
    assert page["finished"] is False
    rest = (await api.get(f"{API}/runs/{run['id']}/logs", params={"after_seq": 1})).json()
    assert [c["seq"] for c in rest["chunks"]] == [2]
    empty = (await api.get(f"{API}/runs/{run['id']}/logs", params={"after_seq": 2})).json()
    assert (empty["chunks"], empty["next_after_seq"]) == ([], 2)


async def test_logs_of_an_unknown_run_or_task_are_refused(api: httpx2.AsyncClient) -> None:
    assert (await api.get(f"{API}/runs/nope/logs")).status_code == 404
    await api.post(f"{API}/jobs", json=now_job("a"))
    run = await _run_of(api, "a")
    r = await api.get(f"{API}/runs/{run['id']}/logs", params={"task": "other"})
    assert (r.status_code, error_of(r)["field"]) == (422, "task")


async def test_preview_lists_fires_in_utc_and_local_time(api: httpx2.AsyncClient) -> None:
    params: dict[str, str | int] = {"cron": "0 9 * * MON-FRI", "tz": "America/New_York", "count": 3}
    r = await api.get(f"{API}/schedule/preview", params={**params, "from": "2026-06-05T00:00:00Z"})
    assert r.status_code == 200, r.text
    fires = r.json()["fires"]
    # Friday 5 June, then Monday 8 and Tuesday 9; 09:00 EDT is 13:00 UTC.
    assert [f["utc"] for f in fires] == [
        "2026-06-05T13:00:00Z",
        "2026-06-08T13:00:00Z",
        "2026-06-09T13:00:00Z",
    ]
    assert fires[0]["local"] == "2026-06-05T09:00:00-04:00"
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []


async def test_preview_defaults_to_now(api: httpx2.AsyncClient) -> None:
    r = await api.get(f"{API}/schedule/preview", params={"cron": "0 0 * * *", "count": 1})
    assert [f["utc"] for f in r.json()["fires"]] == ["2026-06-02T00:00:00Z"]


async def test_preview_names_the_bad_parameter(api: httpx2.AsyncClient) -> None:
    bad_cron = await api.get(f"{API}/schedule/preview", params={"cron": "* * *"})
    assert (bad_cron.status_code, error_of(bad_cron)["field"]) == (422, "cron")
    bad_zone = await api.get(f"{API}/schedule/preview", params={"cron": "* * * * *", "tz": "X/Y"})
    assert (bad_zone.status_code, error_of(bad_zone)["field"]) == (422, "tz")
    missing = await api.get(f"{API}/schedule/preview")
    assert (missing.status_code, error_of(missing)["field"]) == (422, "cron")


async def test_healthz_answers_outside_the_api_prefix(api: httpx2.AsyncClient) -> None:
    r = await api.get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


async def test_a_database_that_does_not_answer_gives_503_with_retry_after(
    api: httpx2.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(*args: object, **kwargs: object) -> None:
        raise StoreUnavailable("database unavailable: connection to 10.1.2.3 refused")

    # Both in the route and in the token check that comes before it.
    for method in ("list_runs", "get_token"):
        monkeypatch.setattr(store, method, down)
        r = await api.get(f"{API}/runs")
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == "1"
        assert error_of(r)["code"] == "unavailable"
        assert "10.1.2.3" not in r.text


async def test_openapi_documents_every_endpoint_and_the_job_schema(
    api: httpx2.AsyncClient,
) -> None:
    doc = (await api.get(f"{API}/openapi.json")).json()
    paths = doc["paths"]
    for path in [
        "/api/v1/jobs",
        "/api/v1/jobs/batch",
        "/api/v1/jobs/{name}",
        "/api/v1/jobs/{name}/trigger",
        "/api/v1/jobs/{name}/pause",
        "/api/v1/jobs/{name}/resume",
        "/api/v1/jobs/{name}/upcoming",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/cancel",
        "/api/v1/runs/{run_id}/retry",
        "/api/v1/runs/{run_id}/logs",
        "/api/v1/task-runs/{task_run_id}/cancel",
        "/api/v1/task-runs/{task_run_id}/retry",
        "/api/v1/schedule/preview",
    ]:
        assert path in paths, path
    schemas = doc["components"]["schemas"]
    assert {"JobCreate", "JobRead", "RunDetailRead", "LogsRead", "ErrorRead"} <= set(schemas)
    assert schemas["JobCreate"]["additionalProperties"] is False
    assert (await api.get("/docs")).status_code == 404
