"""A job's ``start_deadline`` and ``sla`` through the API: saved, shown, changed, cleared;
bad values are a 422 naming the field and change nothing; run hooks only on the job; and
the run alerts of the last hour in ``GET /status``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx2
import pytest

from tests.api.conftest import cron_job, error_of, now_job
from tests.helpers import FakeClock
from tickwork.core.alerts import Alert, AlertKind, WatchedRun
from tickwork.core.model import RunState
from tickwork.ports import Store

API = "/api/v1"
HOOK = {"kind": "http", "url": "https://hooks.example.org/late"}


async def test_deadline_and_sla_are_saved_shown_changed_and_cleared(
    api: httpx2.AsyncClient,
) -> None:
    body = cron_job("nightly", start_deadline=600, sla=3600.5, callbacks={"on_missed": HOOK})
    created = (await api.post(f"{API}/jobs", json=body)).json()
    assert (created["start_deadline"], created["sla"]) == (600.0, 3600.5)
    assert created["callbacks"]["on_missed"]["url"] == HOOK["url"]
    r = await api.patch(f"{API}/jobs/nightly", json={"sla": None, "start_deadline": 120})
    assert r.status_code == 200, r.text
    assert (r.json()["start_deadline"], r.json()["sla"]) == (120.0, None)
    plain = (await api.post(f"{API}/jobs", json=cron_job("plain"))).json()
    assert (plain["start_deadline"], plain["sla"]) == (None, None)  # the default; no SLA


BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "negative deadline": ({"start_deadline": -5}, "start_deadline", "positive"),
    "zero sla": ({"sla": 0}, "sla", "positive"),
    "over a year": ({"sla": 1e12}, "sla", "(a year)"),
    "text": ({"start_deadline": "5m"}, "start_deadline", ""),
    "task hook": (
        {"task": {"kind": "shell", "argv": ["true"], "callbacks": {"on_sla_miss": HOOK}}},
        "task.callbacks.on_sla_miss",
        "set it on the job",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
async def test_a_bad_policy_is_a_422_naming_the_field_and_creates_nothing(
    api: httpx2.AsyncClient, case: str
) -> None:
    extra, field, reason = BAD[case]
    r = await api.post(f"{API}/jobs", json=now_job("bad", **extra))
    assert r.status_code == 422, r.text
    error = error_of(r)
    assert error["field"] == field and reason in error["message"], error
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []


async def test_a_bad_patch_changes_nothing(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("nightly", sla=60))
    r = await api.patch(f"{API}/jobs/nightly", json={"sla": -1})
    assert r.status_code == 422 and error_of(r)["field"] == "sla"
    assert (await api.get(f"{API}/jobs/nightly")).json()["sla"] == 60.0


async def test_status_counts_and_names_the_alerts_of_the_last_hour(
    api: httpx2.AsyncClient, store: Store, clock: FakeClock
) -> None:
    now = clock.now
    late = WatchedRun("r-late", "nightly", now - timedelta(minutes=10), RunState.QUEUED)
    slow = WatchedRun("r-slow", "nightly", now - timedelta(hours=2), RunState.RUNNING)
    old = WatchedRun("r-old", "nightly", now - timedelta(hours=3), RunState.QUEUED)
    minute = timedelta(minutes=1)
    await store.record_alerts(
        [
            Alert(AlertKind.MISSED, late, 5 * minute, 5 * minute),
            Alert(AlertKind.SLA_MISS, slow, minute, minute),
        ],
        now,
    )
    await store.record_alerts(
        [Alert(AlertKind.MISSED, old, minute, minute)], now - 2 * timedelta(hours=1)
    )
    found = (await api.get(f"{API}/status")).json()
    assert (found["missed_runs_last_hour"], found["sla_misses_last_hour"]) == (1, 1)
    assert sorted(a["run_id"] for a in found["alerts"]) == ["r-late", "r-slow"]
    messages = {w["code"]: w["message"] for w in found["warnings"]}
    assert "1 run(s) did not start within their job's start_deadline" in messages["missed_runs"]
    assert "r-late" in messages["missed_runs"] and "r-slow" in messages["sla_misses"]
