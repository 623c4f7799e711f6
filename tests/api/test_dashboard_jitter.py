"""A job's dashboard page shows, next to each upcoming fire, the instant its run becomes due
when the job's jitter moves it; a job with ``jitter: 0`` shows the fires alone."""

from __future__ import annotations

import dataclasses
import itertools
import re
from datetime import UTC, datetime, timedelta

import httpx2

from tests.api.test_dashboard_filters import signed, site
from tests.contract.factory import make_job
from tickwork.api.auth import Security
from tickwork.core.jitter import due_at
from tickwork.dashboard.render import ts
from tickwork.store import SqlStore

__all__ = ["site"]  # the fixture, shared with the filters' tests
HOUR = timedelta(hours=1)


async def test_job_page_shows_each_fires_due_instant_only_when_jitter_moves_it(
    site: httpx2.AsyncClient, security: Security, store: SqlStore
) -> None:
    page = await signed(site, security, store)
    first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + HOUR
    hourly = make_job("spread", cron="0 * * * *", next_fire_at=first)
    dot = make_job("on-the-dot", cron="0 * * * *", next_fire_at=first)
    await store.create_jobs(
        [(dataclasses.replace(hourly, jitter=900.0), []), (dataclasses.replace(dot, jitter=0), [])]
    )

    spread = (await page.get("/jobs/spread")).text
    fires = [first + i * HOUR for i in range(11)]
    for fire, following in itertools.pairwise(fires):
        due = due_at("spread", fire, 900.0, following)
        assert first <= fire < due < following
        assert f"<li>{ts(fire)} " in spread and f"due {ts(due)}" in spread
    assert len(re.findall(r">due <time", spread)) == 10

    plain = (await page.get("/jobs/on-the-dot")).text
    assert f"<li>{ts(first)}</li>" in plain
    assert ">due <time" not in plain
