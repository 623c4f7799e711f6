"""Bad input: a 4xx naming the field, the one error shape, and nothing created."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from tests.api.conftest import at_job, cron_job, drain, error_of, now_job
from tickwork.broker.memory import MemoryBroker

API = "/api/v1"


def _with(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``body`` with the dotted ``path`` set to ``value``."""
    *parents, last = path.split(".")
    node = body
    for key in parents:
        node = node[key]
    node[last] = value
    return body


BAD_JOBS: dict[str, tuple[dict[str, Any], int, str]] = {
    "invalid cron": (cron_job("j", cron="not a cron"), 422, "schedule.cron"),
    "cron out of range": (cron_job("j", cron="0 25 * * *"), 422, "schedule.cron"),
    "unknown zone": (cron_job("j", tz="Mars/Olympus"), 422, "schedule.timezone"),
    "at in the past": (at_job("j", "2020-01-01T00:00:00Z"), 422, "schedule.at"),
    "at without offset": (at_job("j", "2027-01-01T00:00:00"), 422, "schedule.at"),
    "at missing": (_with(at_job("j"), "schedule.at", None), 422, "schedule.at"),
    "unknown schedule kind": (_with(now_job("j"), "schedule.kind", "weekly"), 422, "schedule.kind"),
    "unknown task kind": (_with(now_job("j"), "task.kind", "ftp"), 422, "task.kind"),
    "task kind missing": (_with(now_job("j"), "task", {"argv": ["x"]}), 422, "task.kind"),
    "unknown top-level field": (now_job("j", colour="red"), 422, "colour"),
    "unknown task field": (_with(now_job("j"), "task.url", "http://x"), 422, "task.url"),
    "unknown retry field": (now_job("j", retry={"tries": 3}), 422, "retry.tries"),
    "bad retry value": (now_job("j", retry={"max_attempts": 0}), 422, "retry.max_attempts"),
    "no task": ({"name": "j", "schedule": {"kind": "now"}}, 422, "task"),
    "shell without argv": (_with(now_job("j"), "task", {"kind": "shell"}), 422, "task"),
    "http without url": (_with(now_job("j"), "task", {"kind": "http"}), 422, "task.url"),
    "python target malformed": (
        _with(now_job("j"), "task", {"kind": "python", "target": "no_colon"}),
        422,
        "task.target",
    ),
    "name missing": ({"schedule": {"kind": "now"}, "task": {"kind": "shell"}}, 422, "name"),
    "wrong type": (now_job("j", priority="high"), 422, "priority"),
}


@pytest.mark.parametrize("case", list(BAD_JOBS))
async def test_bad_job_is_refused_with_its_field_and_nothing_is_created(
    api: httpx2.AsyncClient, broker: MemoryBroker, case: str
) -> None:
    body, status, field = BAD_JOBS[case]
    r = await api.post(f"{API}/jobs", json=body)
    assert r.status_code == status, r.text
    error = error_of(r)
    assert error["code"] == "validation_error"
    assert error["field"] is not None and error["field"].startswith(field), error
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []
    assert (await api.get(f"{API}/runs")).json()["runs"] == []
    assert await drain(broker) == []


async def test_at_in_the_past_is_accepted_with_allow_past(api: httpx2.AsyncClient) -> None:
    r = await api.post(
        f"{API}/jobs", json=at_job("late", "2020-01-01T00:00:00Z"), params={"allow_past": True}
    )
    assert r.status_code == 201, r.text
    runs = (await api.get(f"{API}/runs", params={"job": "late"})).json()["runs"]
    assert [run["logical_date"] for run in runs] == ["2020-01-01T00:00:00Z"]


async def test_duplicate_name_is_a_conflict_and_keeps_the_first_job(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    assert (await api.post(f"{API}/jobs", json=cron_job("dup"))).status_code == 201
    r = await api.post(f"{API}/jobs", json=now_job("dup"))
    assert r.status_code == 409
    error = error_of(r)
    assert (error["code"], error["field"]) == ("conflict", "name")
    jobs = (await api.get(f"{API}/jobs")).json()["jobs"]
    assert [(j["name"], j["schedule"]["kind"]) for j in jobs] == [("dup", "cron")]
    assert await drain(broker) == []


async def test_malformed_json_body_is_a_422_not_a_500(api: httpx2.AsyncClient) -> None:
    r = await api.post(
        f"{API}/jobs", content=b'{"name": "x", ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert "JSON" in error_of(r)["message"]
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []


async def test_a_body_that_is_not_an_object_is_refused(api: httpx2.AsyncClient) -> None:
    r = await api.post(f"{API}/jobs", json=["not", "a", "job"])
    assert r.status_code == 422
    assert error_of(r)["code"] == "validation_error"


async def test_task_and_tasks_together_are_refused(api: httpx2.AsyncClient) -> None:
    body = {**now_job("both"), "tasks": [{"kind": "shell", "argv": ["true"]}]}
    r = await api.post(f"{API}/jobs", json=body)
    assert r.status_code == 422
    assert error_of(r)["field"] == "task"


async def test_pydantic_errors_list_every_problem_in_details(api: httpx2.AsyncClient) -> None:
    r = await api.post(f"{API}/jobs", json={"name": 5, "extra": 1})
    assert r.status_code == 422
    details = error_of(r)["details"]
    fields = {d["field"] for d in details}
    assert {"name", "schedule", "extra"} <= fields


async def test_unknown_route_and_wrong_method_use_the_error_shape(
    api: httpx2.AsyncClient,
) -> None:
    missing = await api.get(f"{API}/nothing-here")
    assert (missing.status_code, error_of(missing)["code"]) == (404, "not_found")
    wrong = await api.put(f"{API}/jobs")
    assert (wrong.status_code, error_of(wrong)["code"]) == (405, "method_not_allowed")


async def test_bad_query_parameters_name_the_parameter(api: httpx2.AsyncClient) -> None:
    r = await api.get(f"{API}/runs", params={"limit": 0})
    assert (r.status_code, error_of(r)["field"]) == (422, "limit")
    r = await api.get(f"{API}/runs", params={"state": "sleepy"})
    assert (r.status_code, error_of(r)["field"]) == (422, "state")


NUL = "\x00"
NUL_PARAMETERS: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "job name in the path": ("GET", f"{API}/jobs/a%00", {}, "name"),
    "run id in the path": ("POST", f"{API}/runs/a%00/cancel", {}, "run_id"),
    "task-run id in the path": ("POST", f"{API}/task-runs/a%00/retry", {}, "task_run_id"),
    "token in the path": ("DELETE", f"{API}/tokens/a%00", {}, "token"),
    "list filter": ("GET", f"{API}/jobs", {"params": {"tag": NUL}}, "tag"),
    "list bound": ("GET", f"{API}/jobs", {"params": {"after": NUL}}, "after"),
    "runs filter": ("GET", f"{API}/runs", {"params": {"job": f"a{NUL}"}}, "job"),
    "job field": ("POST", f"{API}/jobs", {"json": now_job("j", queue=NUL)}, "queue"),
    "task field": (
        "POST", f"{API}/jobs", {"json": _with(now_job("j"), "task.argv", [NUL])}, "task.argv[0]",
    ),
    "tag": ("POST", f"{API}/jobs", {"json": now_job("j", tags=["a", NUL])}, "tags[1]"),
    "key of a map": (
        "POST", f"{API}/jobs", {"json": _with(now_job("j"), "task.env", {NUL: "x"})}, "task.env",
    ),
    "idempotency key": (
        "POST", f"{API}/jobs", {"json": now_job("j"), "headers": {"Idempotency-Key": NUL}},
        "Idempotency-Key",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", NUL_PARAMETERS.values(), ids=NUL_PARAMETERS.keys())
async def test_a_nul_character_anywhere_is_a_422_on_every_backend(
    api: httpx2.AsyncClient, case: tuple[str, str, dict[str, Any], str]
) -> None:
    # PostgreSQL cannot hold NUL in text: without the check these were 500s there.
    method, url, options, field = case
    r = await api.request(method, url, **options)
    assert r.status_code == 422, r.text
    error = error_of(r)
    assert error["field"] == field, error
    assert error["message"] == "must not contain the NUL character (U+0000)"
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []


async def test_free_form_json_may_hold_a_nul_and_reads_back_the_same(
    api: httpx2.AsyncClient,
) -> None:
    # metadata, kwargs, params and an http body are stored as JSON, where NUL is escaped.
    task = {"kind": "python", "target": "tests.fixtures.tasks:noop", "kwargs": {"k": NUL}}
    params = {"properties": {"p": {"type": "string"}}}
    body = now_job("j", metadata={f"a{NUL}": [NUL]}, task=task, params=params)
    created = await api.post(f"{API}/jobs", json=body)
    assert created.status_code == 201, created.text
    job = (await api.get(f"{API}/jobs/j")).json()
    assert (job["metadata"], job["tasks"][0]["config"]["kwargs"]) == (
        {f"a{NUL}": [NUL]},
        {"k": NUL},
    )
    run = await api.post(
        f"{API}/jobs/j/trigger", json={"logical_date": "2026-05-01T00:00:00Z", "params": {"p": NUL}}
    )
    assert run.status_code == 201, run.text
    assert run.json()["task_runs"][0]["config"]["kwargs"] == {"k": NUL, "p": NUL}
