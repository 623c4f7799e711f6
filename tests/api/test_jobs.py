"""The jobs endpoints: create (one and batch), list, show, delete, pause, resume, trigger."""

from __future__ import annotations

import httpx2

from tests.api.conftest import at_job, cron_job, drain, error_of, now_job
from tests.helpers import Wakes
from tickwork.broker.memory import MemoryBroker

API = "/api/v1"


async def test_create_now_job_queues_its_run_and_publishes_a_delivery(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    r = await api.post(f"{API}/jobs", json=now_job("hello"))
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["name"] == "hello"
    assert job["schedule"]["kind"] == "now"
    assert job["tasks"][0]["config"]["argv"] == ["true"]

    runs = (await api.get(f"{API}/runs", params={"job": "hello"})).json()["runs"]
    assert [r["state"] for r in runs] == ["queued"]
    detail = (await api.get(f"{API}/runs/{runs[0]['id']}")).json()
    task_run = detail["task_runs"][0]
    assert task_run["state"] == "queued"
    deliveries = await drain(broker)
    assert [(d.task_run_id, d.attempt) for d in deliveries] == [(task_run["id"], 1)]


async def test_create_at_job_schedules_a_run_at_the_instant_and_wakes_the_scheduler(
    api: httpx2.AsyncClient, broker: MemoryBroker, wakes: Wakes
) -> None:
    r = await api.post(f"{API}/jobs", json=at_job("ping", "2027-01-02T03:04:05+01:00"))
    assert r.status_code == 201, r.text
    assert r.json()["schedule"]["at"] == "2027-01-02T02:04:05Z"

    runs = (await api.get(f"{API}/runs", params={"job": "ping"})).json()["runs"]
    assert [(r["state"], r["logical_date"]) for r in runs] == [
        ("scheduled", "2027-01-02T02:04:05Z")
    ]
    assert wakes.count == 1
    assert await drain(broker) == []
    upcoming = (await api.get(f"{API}/jobs/ping/upcoming")).json()
    assert [f["utc"] for f in upcoming["fires"]] == ["2027-01-02T02:04:05Z"]


async def test_create_cron_job_sets_next_fire_in_its_zone_and_creates_no_run(
    api: httpx2.AsyncClient,
) -> None:
    r = await api.post(f"{API}/jobs", json=cron_job("backup", "30 2 * * *", "Europe/Berlin"))
    assert r.status_code == 201, r.text
    # 02:30 in Berlin in June (CEST, UTC+2) is 00:30 UTC, the day after NOW (12:00 UTC).
    assert r.json()["next_fire_at"] == "2026-06-02T00:30:00Z"
    assert (await api.get(f"{API}/runs", params={"job": "backup"})).json()["runs"] == []

    upcoming = (await api.get(f"{API}/jobs/backup/upcoming", params={"count": 3})).json()
    assert upcoming["timezone"] == "Europe/Berlin"
    assert [f["utc"] for f in upcoming["fires"]] == [
        "2026-06-02T00:30:00Z",
        "2026-06-03T00:30:00Z",
        "2026-06-04T00:30:00Z",
    ]
    assert upcoming["fires"][0]["local"] == "2026-06-02T02:30:00+02:00"


async def test_create_job_keeps_policies_and_task_fields(api: httpx2.AsyncClient) -> None:
    body = now_job(
        "policy",
        retry={"max_attempts": 3, "initial_delay": 2},
        timeout=30,
        queue="gpu",
        priority=5,
        tags=["a", "b"],
        metadata={"owner": "ops"},
    )
    body["task"] = {"kind": "shell", "argv": ["env"], "env": {"K": "V"}, "cwd": "/tmp"}
    job = (await api.post(f"{API}/jobs", json=body)).json()
    assert job["retry"]["max_attempts"] == 3
    assert job["retry"]["initial_delay"] == 2
    assert (job["timeout"], job["queue"], job["priority"]) == (30, "gpu", 5)
    assert (job["tags"], job["metadata"]) == (["a", "b"], {"owner": "ops"})
    assert job["tasks"][0]["config"]["env"] == {"K": "V"}
    assert job["tasks"][0]["config"]["cwd"] == "/tmp"


async def test_batch_creates_every_job_and_publishes_the_now_ones(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    jobs = [now_job(f"n{i}") for i in range(5)] + [cron_job("c"), at_job("a")]
    r = await api.post(f"{API}/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201, r.text
    assert [j["name"] for j in r.json()] == [j["name"] for j in jobs]
    listed = (await api.get(f"{API}/jobs")).json()["jobs"]
    assert sorted(j["name"] for j in listed) == sorted(j["name"] for j in jobs)
    assert len(await drain(broker)) == 5


async def test_batch_with_one_bad_job_creates_none_and_names_the_item(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    jobs = [now_job("ok1"), cron_job("bad", cron="61 * * * *"), now_job("ok2")]
    r = await api.post(f"{API}/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 422
    assert error_of(r)["field"] == "jobs[1].schedule.cron"
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []
    assert await drain(broker) == []


async def test_batch_refuses_a_name_given_twice(api: httpx2.AsyncClient) -> None:
    r = await api.post(f"{API}/jobs/batch", json={"jobs": [now_job("x"), now_job("x")]})
    assert r.status_code == 409
    assert error_of(r)["field"] == "jobs[1].name"
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []


async def test_batch_refuses_more_than_1000_jobs(api: httpx2.AsyncClient) -> None:
    r = await api.post(f"{API}/jobs/batch", json={"jobs": [now_job(f"j{i}") for i in range(1001)]})
    assert r.status_code == 422
    assert error_of(r)["field"] == "jobs"


async def test_list_jobs_is_ordered_by_name_and_paginates(api: httpx2.AsyncClient) -> None:
    for name in ["c", "a", "b"]:
        assert (await api.post(f"{API}/jobs", json=cron_job(name))).status_code == 201
    first = (await api.get(f"{API}/jobs", params={"limit": 2})).json()
    assert [j["name"] for j in first["jobs"]] == ["a", "b"]
    assert first["next_after"] == "b"
    rest = (await api.get(f"{API}/jobs", params={"after": "b"})).json()
    assert [j["name"] for j in rest["jobs"]] == ["c"]
    assert rest["next_after"] is None


async def test_get_job_returns_it_or_404(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("backup"))
    assert (await api.get(f"{API}/jobs/backup")).json()["name"] == "backup"
    r = await api.get(f"{API}/jobs/nope")
    assert r.status_code == 404
    assert error_of(r)["code"] == "not_found"


async def test_delete_job_removes_it_and_cancels_its_queued_run(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=now_job("gone"))
    run_id = (await api.get(f"{API}/runs")).json()["runs"][0]["id"]
    assert (await api.delete(f"{API}/jobs/gone")).status_code == 204
    assert (await api.get(f"{API}/jobs/gone")).status_code == 404
    assert (await api.get(f"{API}/runs/{run_id}")).json()["state"] == "cancelled"
    assert (await api.delete(f"{API}/jobs/gone")).status_code == 404


async def test_deleted_name_can_be_reused(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("again"))
    await api.delete(f"{API}/jobs/again")
    assert (await api.post(f"{API}/jobs", json=cron_job("again"))).status_code == 201


async def test_pause_and_resume_flip_the_flag_and_resume_wakes_the_scheduler(
    api: httpx2.AsyncClient, wakes: Wakes
) -> None:
    await api.post(f"{API}/jobs", json=cron_job("backup"))
    assert (await api.post(f"{API}/jobs/backup/pause")).json()["paused"] is True
    assert (await api.get(f"{API}/jobs/backup")).json()["paused"] is True
    before = wakes.count
    assert (await api.post(f"{API}/jobs/backup/resume")).json()["paused"] is False
    assert wakes.count == before + 1
    assert (await api.post(f"{API}/jobs/nope/pause")).status_code == 404


async def test_trigger_queues_a_manual_run_and_refuses_a_duplicate_logical_date(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    await api.post(f"{API}/jobs", json=cron_job("backup"))
    body = {"logical_date": "2026-05-01T00:00:00Z"}
    r = await api.post(f"{API}/jobs/backup/trigger", json=body)
    assert r.status_code == 201, r.text
    run = r.json()
    assert (run["trigger"], run["state"], run["logical_date"]) == (
        "manual",
        "queued",
        "2026-05-01T00:00:00Z",
    )
    assert [d.task_run_id for d in await drain(broker)] == [run["task_runs"][0]["id"]]

    again = await api.post(f"{API}/jobs/backup/trigger", json=body)
    assert again.status_code == 409
    assert error_of(again)["field"] == "logical_date"


async def test_trigger_without_body_runs_for_now(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=cron_job("backup"))
    r = await api.post(f"{API}/jobs/backup/trigger")
    assert r.status_code == 201, r.text
    assert r.json()["logical_date"] == "2026-06-01T12:00:00Z"
    assert (await api.post(f"{API}/jobs/nope/trigger")).status_code == 404


async def test_upcoming_is_empty_for_a_now_job_and_404_for_an_unknown_one(
    api: httpx2.AsyncClient,
) -> None:
    await api.post(f"{API}/jobs", json=now_job("hello"))
    assert (await api.get(f"{API}/jobs/hello/upcoming")).json()["fires"] == []
    assert (await api.get(f"{API}/jobs/nope/upcoming")).status_code == 404
