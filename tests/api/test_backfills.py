"""Backfills through the API: create, dry run, list, show, dates, pause, resume, cancel, and
the scope a write token needs."""

from __future__ import annotations

import httpx2
from fastapi import FastAPI

from tests.api.conftest import cron_job, error_of
from tickwork.api.auth import Security
from tickwork.ports import Scope

API = "/api/v1"
RANGE = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-05T23:00:00Z"}


def http_cron_job(name: str) -> dict[str, object]:
    return {
        **cron_job(name),
        "task": {"kind": "http", "method": "GET", "url": "https://example.org/health"},
    }


async def test_create_show_list_pause_resume_cancel(api: httpx2.AsyncClient) -> None:
    assert (await api.post(f"{API}/jobs", json=cron_job("daily"))).status_code == 201
    r = await api.post(f"{API}/backfills", json={"job": "daily", **RANGE, "max_active": 2})
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["from"], made["to"]) == ("2026-03-01T00:00:00Z", "2026-03-05T23:00:00Z")
    assert made["state"] == "running" and made["progress"]["total"] == 5
    assert made["progress"]["remaining"] == 5 and made["mode"] == "parallel"

    listed = (await api.get(f"{API}/backfills", params={"job": "daily"})).json()["backfills"]
    assert [b["id"] for b in listed] == [made["id"]]
    paused = await api.post(f"{API}/backfills/{made['id']}/pause")
    assert paused.json()["state"] == "paused"
    again = await api.post(f"{API}/backfills/{made['id']}/pause")
    assert again.status_code == 409 and error_of(again)["field"] == "backfill"
    resumed = await api.post(f"{API}/backfills/{made['id']}/resume")
    assert resumed.json()["state"] == "running"
    cancelled = await api.post(f"{API}/backfills/{made['id']}/cancel", params={"kill": "true"})
    assert cancelled.json()["state"] == "cancelled" and cancelled.json()["finished_at"]
    dates = await api.get(f"{API}/backfills/{made['id']}/dates")
    assert dates.status_code == 200 and dates.json() == {"dates": []}


async def test_dry_run_lists_dates_and_writes_nothing(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("daily"))
    r = await api.post(f"{API}/backfills/plan", json={"job": "daily", **RANGE})
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["total"] == 5 and [d["action"] for d in plan["dates"]] == ["create"] * 5
    assert plan["dates"][0]["logical_date"] == "2026-03-01T01:30:00Z"  # 02:30 Berlin
    assert (await api.get(f"{API}/backfills")).json() == {"backfills": []}


async def test_bad_input_names_the_field(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("daily"))
    cases = [
        ({"job": "daily", **RANGE, "mode": "fast"}, 422, "mode"),
        ({"job": "daily", "from": RANGE["to"], "to": RANGE["from"]}, 422, "to"),
        ({"job": "daily", **RANGE, "max_active": 0}, 422, "max_active"),
        ({"job": "nope", **RANGE}, 404, "job"),
    ]
    for body, status, field in cases:
        r = await api.post(f"{API}/backfills", json=body)
        assert r.status_code == status, (body, r.text)
        assert field in str(error_of(r)), (body, r.text)
    assert (await api.get(f"{API}/backfills/nope")).status_code == 404
    await api.post(f"{API}/backfills", json={"job": "daily", **RANGE})
    overlap = await api.post(f"{API}/backfills", json={"job": "daily", **RANGE})
    assert overlap.status_code == 409 and error_of(overlap)["field"] == "range"


async def test_a_write_token_may_backfill_http_jobs_only(
    api: httpx2.AsyncClient, app: FastAPI, security: Security
) -> None:
    await api.post(f"{API}/jobs", json=cron_job("python_job"))
    await api.post(f"{API}/jobs", json=http_cron_job("http_job"))
    secret = (await security.tokens.create("writer", Scope.WRITE)).secret
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t", headers=headers
    ) as writer:
        refused = await writer.post(f"{API}/backfills", json={"job": "python_job", **RANGE})
        assert refused.status_code == 403, refused.text
        made = await writer.post(f"{API}/backfills", json={"job": "http_job", **RANGE})
        assert made.status_code == 201, made.text
    mine = (await api.post(f"{API}/backfills", json={"job": "python_job", **RANGE})).json()
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t", headers=headers
    ) as writer:
        assert (await writer.get(f"{API}/backfills/{mine['id']}")).status_code == 200
        r = await writer.post(f"{API}/backfills/{mine['id']}/cancel")
        assert r.status_code == 403, r.text
