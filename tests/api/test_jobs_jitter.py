"""Jitter over the API: stored and shown, refused with a 422 naming it, previewed as due."""

from __future__ import annotations

import itertools
from datetime import datetime

import httpx2
import pytest

from tests.api.conftest import at_job, cron_job, error_of, now_job
from tickwork.core.jitter import due_at

API = "/api/v1"


async def test_cron_job_with_jitter_is_stored_and_its_upcoming_fires_show_the_due_instant(
    api: httpx2.AsyncClient,
) -> None:
    r = await api.post(f"{API}/jobs", json=cron_job("hourly", "0 * * * *", "UTC", jitter=900))
    assert r.status_code == 201, r.text
    assert r.json()["jitter"] == 900
    fires = (await api.get(f"{API}/jobs/hourly/upcoming", params={"count": 3})).json()["fires"]
    for fire, following in itertools.pairwise(fires):
        logical = datetime.fromisoformat(fire["utc"])
        expected = due_at("hourly", logical, 900, datetime.fromisoformat(following["utc"]))
        assert datetime.fromisoformat(fire["due"]) == expected
        assert fire["utc"] < fire["due"] < following["utc"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (cron_job("j", jitter=-1), "from 0 to 604800"),
        (cron_job("j", jitter=10**7), "from 0 to 604800"),
        (now_job("j", jitter=60), "only cron schedules"),
        ({**at_job("j"), "jitter": 60}, "only cron schedules"),
        (cron_job("j", jitter="soon"), ""),
    ],
)
async def test_bad_jitter_is_a_422_naming_it_and_creates_nothing(
    api: httpx2.AsyncClient, body: dict[str, object], reason: str
) -> None:
    r = await api.post(f"{API}/jobs", json=body)
    assert r.status_code == 422, r.text
    error = error_of(r)
    assert error["field"] == "jitter", error
    assert reason in error["message"]
    assert (await api.get(f"{API}/jobs/j")).status_code == 404


async def test_patch_sets_and_clears_jitter_and_refuses_a_negative_one(
    api: httpx2.AsyncClient,
) -> None:
    assert (await api.post(f"{API}/jobs", json=cron_job("c"))).status_code == 201
    r = await api.patch(f"{API}/jobs/c", json={"jitter": 30})
    assert r.status_code == 200, r.text
    assert r.json()["jitter"] == 30
    bad = await api.patch(f"{API}/jobs/c", json={"jitter": -3})
    assert bad.status_code == 422 and error_of(bad)["field"] == "jitter"
    assert (await api.get(f"{API}/jobs/c")).json()["jitter"] == 30
    cleared = await api.patch(f"{API}/jobs/c", json={"jitter": None})
    assert cleared.status_code == 200 and cleared.json()["jitter"] is None


async def test_preview_with_jitter_shows_each_fires_due_instant(api: httpx2.AsyncClient) -> None:
    params: dict[str, str | int] = {
        "cron": "*/5 * * * *",
        "count": 2,
        "from": "2026-06-01T12:00:00Z",
    }
    r = await api.get(f"{API}/schedule/preview", params={**params, "jitter": 600, "job": "x"})
    assert r.status_code == 200, r.text
    first, second = r.json()["fires"]
    logical = datetime.fromisoformat(first["utc"])
    expected = due_at("x", logical, 600, datetime.fromisoformat(second["utc"]))
    assert datetime.fromisoformat(first["due"]) == expected
    plain = (await api.get(f"{API}/schedule/preview", params=params)).json()["fires"]
    assert [f["due"] for f in plain] == [f["utc"] for f in plain]
    bad = await api.get(f"{API}/schedule/preview", params={**params, "jitter": -1})
    assert bad.status_code == 422 and error_of(bad)["field"] == "jitter"
