"""The dashboard's filters (jobs by queue and last run state, runs by trigger and job tag),
"mark for replay" and the standbys on the overview, through the app in process (SQLite and
PostgreSQL): the same filters on ``GET /api/v1/jobs`` and ``/runs`` and the pages' URLs."""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import httpx2
import pytest

from tests.contract.factory import at, make_job, make_run
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.core.model import Job, RunTrigger, TaskRunState
from tickwork.dashboard import with_dashboard
from tickwork.dashboard.session import COOKIE, _digest
from tickwork.ports import Lease, Scope, WorkerInfo
from tickwork.ports.web import WebSession
from tickwork.store import SqlStore

CSRF = "csrf-of-the-test-session"
Signed = Callable[[Scope], "AsyncIterator[httpx2.AsyncClient]"]


def job(name: str, queue: str = "default", tags: tuple[str, ...] = ()) -> Job:
    return dataclasses.replace(make_job(name), queue=queue, tags=tags)


async def seed(store: SqlStore) -> dict[str, str]:
    """Four jobs: their newest runs succeeded, failed, never ran; one manual run."""
    ok, bad, idle, tagged = (
        job("ok"),
        job("bad", queue="reports"),
        job("idle", queue="reports"),
        job("tagged", tags=("nightly",)),
    )
    await store.create_jobs([(j, []) for j in (ok, bad, idle, tagged)])
    runs = [
        make_run(ok, at(0), state=TaskRunState.FAILED),
        make_run(ok, at(60), state=TaskRunState.SUCCESS),  # newest of ok: success
        make_run(bad, at(0), state=TaskRunState.SUCCESS),
        make_run(bad, at(60), state=TaskRunState.FAILED),  # newest of bad: failed
        make_run(tagged, at(0), state=TaskRunState.SUCCESS),
        make_run(tagged, at(30), state=TaskRunState.SUCCESS, trigger=RunTrigger.MANUAL),
        make_run(ok, at(40), state=TaskRunState.SUCCESS, trigger=RunTrigger.MANUAL),
    ]
    await store.create_runs(runs)
    return {"tagged_manual": runs[5].run.id, "ok_manual": runs[6].run.id, "bad": runs[3].run.id}


async def session_for(security: Security, store: SqlStore, scope: Scope) -> str:
    issued = await security.tokens.create(f"dash-{scope.value}", scope)
    secret = secrets.token_urlsafe(24)
    now = datetime.now(UTC)  # sessions expire by the wall clock
    session = WebSession(_digest(secret), issued.token.id, CSRF, now, now + timedelta(hours=1))
    await store.create_web_session(session)
    return secret


@pytest.fixture
async def site(services: Services, security: Security) -> AsyncIterator[httpx2.AsyncClient]:
    app = with_dashboard(create_app(services, security=security), services)
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://tickwork.test") as client:
        yield client


async def signed(
    site: httpx2.AsyncClient, security: Security, store: SqlStore, scope: Scope = Scope.ADMIN
) -> httpx2.AsyncClient:
    site.cookies.set(COOKIE, await session_for(security, store, scope))
    return site


def names(html: str) -> list[str]:
    """The job names a jobs page lists (its table's first column)."""
    return re.findall(r'<td><a href="/jobs/[^"]+">([^<]+)</a>', html)


def run_ids(html: str) -> list[str]:
    return re.findall(r'<a href="/runs/([0-9A-Za-z]+)"><code>', html)


async def test_jobs_by_queue_and_last_state_in_the_api_and_the_page(
    api: httpx2.AsyncClient, site: httpx2.AsyncClient, security: Security, store: SqlStore
) -> None:
    await seed(store)
    listed = await api.get("/api/v1/jobs", params={"queue": "reports"})
    assert [j["name"] for j in listed.json()["jobs"]] == ["bad", "idle"]
    failed = await api.get("/api/v1/jobs", params={"last_state": "failed"})
    assert [j["name"] for j in failed.json()["jobs"]] == ["bad"]  # ok failed once, not last
    both = await api.get("/api/v1/jobs", params={"queue": "default", "last_state": "success"})
    assert [j["name"] for j in both.json()["jobs"]] == ["ok", "tagged"]
    refused = await api.get("/api/v1/jobs", params={"last_state": "exploded"})
    assert refused.status_code == 422 and "last_state" in refused.text

    page = await signed(site, security, store)
    html = (await page.get("/jobs?queue=reports&last=failed")).text
    assert names(html) == ["bad"]
    assert 'value="reports"' in html and "<option selected>failed</option>" in html
    assert names((await page.get("/jobs?queue=reports")).text) == ["bad", "idle"]
    bad = await page.get("/jobs?last=exploded")
    assert bad.status_code == 400 and "last: must be one of" in bad.text


async def test_runs_by_trigger_and_job_tag_in_the_api_and_the_page(
    api: httpx2.AsyncClient, site: httpx2.AsyncClient, security: Security, store: SqlStore
) -> None:
    ids = await seed(store)
    manual = await api.get("/api/v1/runs", params={"trigger": "manual"})
    assert [r["id"] for r in manual.json()["runs"]] == [ids["ok_manual"], ids["tagged_manual"]]
    tagged = await api.get("/api/v1/runs", params={"tag": "nightly"})
    assert {r["job_name"] for r in tagged.json()["runs"]} == {"tagged"}
    assert len(tagged.json()["runs"]) == 2
    both = await api.get("/api/v1/runs", params={"tag": "nightly", "trigger": "manual"})
    assert [r["id"] for r in both.json()["runs"]] == [ids["tagged_manual"]]
    refused = await api.get("/api/v1/runs", params={"trigger": "sometimes"})
    assert refused.status_code == 422 and "trigger" in refused.text

    page = await signed(site, security, store)
    html = (await page.get("/runs?trigger=manual&tag=nightly")).text
    assert run_ids(html) == [ids["tagged_manual"]]
    assert 'value="nightly"' in html
    first = (await page.get("/runs?trigger=manual&tag=")).text  # an empty field: any
    assert run_ids(first) == [ids["ok_manual"], ids["tagged_manual"]]
    bad = await page.get("/runs?trigger=sometimes")
    assert bad.status_code == 400 and "trigger: must be one of" in bad.text


async def test_mark_for_replay_runs_every_task_again_and_is_audited(
    site: httpx2.AsyncClient, security: Security, store: SqlStore, services: Services
) -> None:
    ids = await seed(store)
    run_id = ids["ok_manual"]  # a finished (successful) run
    page = await signed(site, security, store)
    shown = (await page.get(f"/runs/{run_id}")).text
    assert f'action="/runs/{run_id}/replay"' in shown

    forged = await page.post(f"/runs/{run_id}/replay", data={"csrf": "forged"})
    assert forged.status_code == 403
    assert (await services.get_run(run_id)).task_runs[0].attempt == 1  # nothing changed

    done = await page.post(f"/runs/{run_id}/replay", data={"csrf": CSRF})
    assert done.status_code == 303 and done.headers["location"] == f"/runs/{run_id}"
    (tr,) = (await services.get_run(run_id)).task_runs
    assert (tr.state, tr.attempt) == (TaskRunState.SCHEDULED, 2)
    entry = (await store.list_audit(limit=1)).entries[0]
    assert (entry.action, entry.target, entry.outcome) == ("replay_run", f"run:{run_id}", "ok")

    again = await page.post(f"/runs/{run_id}/replay", data={"csrf": CSRF})  # not finished now
    assert again.status_code == 303
    assert (await services.get_run(run_id)).task_runs[0].attempt == 2
    entry = (await store.list_audit(limit=1)).entries[0]
    assert (entry.action, entry.outcome) == ("replay_run", "refused")


async def test_replay_needs_a_write_token_and_a_finished_run_in_the_api(
    api: httpx2.AsyncClient, site: httpx2.AsyncClient, security: Security, store: SqlStore
) -> None:
    ids = await seed(store)
    reader = await signed(site, security, store, Scope.READ)
    assert 'action="/runs/' not in (await reader.get(f"/runs/{ids['bad']}")).text
    refused = await reader.post(f"/runs/{ids['bad']}/replay", data={"csrf": CSRF})
    assert refused.status_code == 403
    assert (await store.list_audit(limit=1)).entries[0].outcome == "forbidden"

    replayed = await api.post(f"/api/v1/runs/{ids['bad']}/replay")
    assert replayed.status_code == 200, replayed.text
    body = replayed.json()
    assert [(t["state"], t["attempt"]) for t in body["task_runs"]] == [("scheduled", 2)]
    unfinished = await api.post(f"/api/v1/runs/{ids['bad']}/replay")
    assert unfinished.status_code == 409 and "only a finished run" in unfinished.text
    missing = await api.post("/api/v1/runs/nope/replay")
    assert missing.status_code == 404


async def test_overview_lists_the_leader_and_its_standbys(
    site: httpx2.AsyncClient, security: Security, store: SqlStore
) -> None:
    lease: Lease | None = await store.acquire_lease("scheduler", "host-a:1:aa", 30)
    assert lease is not None
    now = datetime.now(UTC)
    for holder, kind in (("host-a:1:aa", "scheduler"), ("host-b:2:bb", "scheduler"),
                         ("w-1", "worker")):  # fmt: skip
        await store.register_worker(
            WorkerInfo(holder, holder.split(":")[0], 7, (), 0, now, now, kind=kind)
        )
    html = (await (await signed(site, security, store)).get("/")).text
    assert "Leader <strong>host-a:1:aa</strong>" in html
    standbys = re.search(r'<ul class="plain standbys">(.*?)</ul>', html, re.S)
    assert standbys is not None and re.findall(r"<code>([^<]+)</code>", standbys[1]) == [
        "host-b:2:bb"
    ]
