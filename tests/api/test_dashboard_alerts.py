"""Run alerts on the dashboard (SQLite and PostgreSQL, in process): the overview warns of
the late runs of the last hour, a job's page of its own and shows its deadline and SLA."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import httpx2

from tests.api.test_dashboard_filters import signed, site
from tests.contract.factory import make_job
from tickwork.api.auth import Security
from tickwork.core.alerts import Alert, AlertKind, WatchedRun
from tickwork.core.model import RunState
from tickwork.store import SqlStore

__all__ = ["site"]  # the fixture, shared with the filters' tests
MIN = timedelta(minutes=1)


async def test_overview_and_job_page_show_late_runs(
    site: httpx2.AsyncClient, security: Security, store: SqlStore
) -> None:
    page = await signed(site, security, store)
    quiet = (await page.get("/")).text
    assert "Late runs" not in quiet
    job = dataclasses.replace(make_job("nightly"), sla=5400.0)
    await store.create_jobs([(job, []), (make_job("other"), [])])
    now = datetime.now(UTC)  # the dashboard reads the wall clock
    late = WatchedRun("r-late", "nightly", now - 9 * MIN, RunState.QUEUED)
    slow = WatchedRun("r-slow", "other", now - 100 * MIN, RunState.RUNNING)
    await store.record_alerts(
        [
            Alert(AlertKind.MISSED, late, 5 * MIN, 4 * MIN),
            Alert(AlertKind.SLA_MISS, slow, MIN, MIN),
        ],
        now,
    )

    overview = (await page.get("/")).text
    assert "Late runs (last hour)" in overview
    assert "1 run(s) missed their start deadline · 1 missed their SLA" in overview
    assert 'href="/runs/r-late"' in overview and 'href="/runs/r-slow"' in overview
    assert "not started within 5 min 0 s" in overview

    nightly = (await page.get("/jobs/nightly")).text
    assert "Start deadline 5 min 0 s (default) · SLA 1 h 30 min" in nightly
    assert 'href="/runs/r-late"' in nightly and "r-slow" not in nightly
