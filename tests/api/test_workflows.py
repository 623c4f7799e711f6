"""DAG jobs through the API: the new task and job fields, their refusals, and how runs read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx2
import pytest

from tests.api.conftest import NOW, error_of, now_job
from tests.fixtures.task_runs import make_task_run
from tests.helpers import FakeClock
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.api.schemas.read import RunDetailRead
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import Run, RunDetail, RunState, RunTrigger, TaskKind
from tickwork.ports import Scope
from tickwork.security.ssrf import UrlGuard
from tickwork.store import SqlStore

API = "/api/v1"
HOOK = {"kind": "http", "url": "https://hooks.example.org/etl", "headers": {"X-Team": "etl"}}


def sh(name: str, *upstream: str, **more: Any) -> dict[str, Any]:
    return {"kind": "shell", "name": name, "argv": ["true"], "upstream": list(upstream), **more}


def dag(name: str, *tasks: dict[str, Any], **job: Any) -> dict[str, Any]:
    body = now_job(name, **job)
    del body["task"]
    return {**body, "tasks": list(tasks)}


def etl(**job: Any) -> dict[str, Any]:
    """extract_users + extract_orders -> join -> aggregate -> load, as the API takes it."""
    return dag(
        "etl",
        sh("extract_users", pool="db", pool_slots=2, priority=5),
        sh("extract_orders", pool="db"),
        {
            "kind": "python",
            "name": "join",
            "target": "tests.fixtures.tasks:noop",
            "upstream": ["extract_users", "extract_orders"],
            "kwargs": {"users": {"$result": "extract_users"}},
            "callbacks": {"on_retry": {"kind": "python", "target": "tests.fixtures.tasks:noop"}},
        },
        sh("aggregate", "join", trigger_rule="none_failed"),
        sh("load", "aggregate", callbacks={"on_success": HOOK}),
        **job,
    )


async def _pool(api: httpx2.AsyncClient, name: str = "db", slots: int = 4) -> None:
    r = await api.put(f"{API}/pools/{name}", json={"slots": slots})
    assert r.status_code in (200, 201), r.text


async def test_a_dag_job_is_created_and_reads_back_every_field(api: httpx2.AsyncClient) -> None:
    await _pool(api)
    body = etl(max_active_runs=1, depends_on_past=True, callbacks={"on_failure": HOOK})
    r = await api.post(f"{API}/jobs", json=body)
    assert r.status_code == 201, r.text
    job = (await api.get(f"{API}/jobs/etl")).json()
    assert (job["max_active_runs"], job["depends_on_past"]) == (1, True)
    assert job["callbacks"] == {"on_failure": HOOK}
    users, orders, join, aggregate, load = job["tasks"]
    assert (users["pool"], users["pool_slots"], users["priority"]) == ("db", 2, 5)
    assert (orders["pool_slots"], orders["priority"]) == (1, None)
    assert join["upstream"] == ["extract_users", "extract_orders"]
    assert join["config"]["kwargs"] == {"users": {"$result": "extract_users"}}
    assert join["callbacks"] == {
        "on_retry": {"kind": "python", "target": "tests.fixtures.tasks:noop"}
    }
    assert (aggregate["trigger_rule"], join["trigger_rule"]) == ("none_failed", "all_success")
    assert load["callbacks"] == {"on_success": HOOK}


async def test_a_run_of_a_dag_shows_each_task_runs_graph_fields(api: httpx2.AsyncClient) -> None:
    await _pool(api)
    assert (await api.post(f"{API}/jobs", json=etl())).status_code == 201
    run = (await api.get(f"{API}/runs", params={"job": "etl"})).json()["runs"][0]
    detail = (await api.get(f"{API}/runs/{run['id']}")).json()
    by_name = {tr["task_name"]: tr for tr in detail["task_runs"]}
    # A root task may go (queued, or scheduled until its pool admits it); join waits.
    assert by_name["extract_users"]["state"] in ("queued", "scheduled")
    assert by_name["join"]["state"] == "pending"
    assert by_name["join"]["upstream"] == ["extract_users", "extract_orders"]
    users = by_name["extract_users"]
    assert (users["pool"], users["pool_slots"], users["priority"]) == ("db", 2, 5)
    assert by_name["aggregate"]["trigger_rule"] == "none_failed"
    assert all(tr["result"] is None for tr in detail["task_runs"])


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ('{"rows": [1, 2], "ok": true}', {"rows": [1, 2], "ok": True}),
        ('"done"', "done"),
        ("3", 3),
        ("null", None),
        (None, None),
        ("not json", "not json"),
    ],
)
def test_a_task_runs_result_reads_as_the_json_it_holds(stored: str | None, shown: Any) -> None:
    task_run = replace(make_task_run(TaskKind.SHELL, {"argv": ["true"]}), result=stored)
    run = Run("r1", "j1", "job", NOW, RunState.SUCCESS, RunTrigger.MANUAL, NOW)
    read = RunDetailRead.of(RunDetail(run, (task_run,), ()))
    assert read.model_dump(mode="json")["task_runs"][0]["result"] == shown


def _without(body: dict[str, Any], field: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != field}


BAD_DAGS: list[tuple[dict[str, Any], str, str]] = [
    (
        dag("w", sh("a", "c"), sh("b", "a"), sh("c", "b")),
        "tasks",
        "the tasks form a cycle (a -> b -> c -> a); upstreams must form a DAG",
    ),
    (
        dag("w", sh("a"), sh("join", "a", "ghost")),
        "tasks[1].upstream",
        "'ghost' is not another task of this job; name one of ['a', 'join'] (task 'join')",
    ),
    (dag("w", sh("a"), sh("a")), "tasks[1].name", "'a' is used twice"),
    (dag("w"), "tasks", "a job needs at least one task"),
    (dag("w", sh("a"), sh("b", "a", pool="no space")), "tasks[1].pool", "(task 'b')"),
    (dag("w", sh("a", pool_slots=0)), "tasks[0].pool_slots", "1 or more"),
    (dag("w", sh("a", trigger_rule="always")), "tasks[0].trigger_rule", "all_success"),
    (dag("w", sh("a", colour="red")), "tasks[0].colour", "Extra inputs are not permitted"),
    (
        dag("w", sh("a", callbacks={"on_done": HOOK})),
        "tasks[0].callbacks.on_done",
        "Extra inputs are not permitted",
    ),
    (
        dag("w", sh("a", callbacks={"on_failure": {"kind": "shell", "argv": ["x"]}})),
        "tasks[0].callbacks.on_failure.kind",
        "must be one of: http, python",
    ),
    (
        dag("w", sh("a", callbacks={"on_failure": {"kind": "http", "url": "ftp://x"}})),
        "tasks[0].callbacks.on_failure.url",
        "http:// or https:// URL",
    ),
    (
        dag(
            "w",
            sh("a", callbacks={"on_failure": {"kind": "http", "url": "https://x.org", "body": 1}}),
        ),
        "tasks[0].callbacks.on_failure.body",
        "Extra inputs are not permitted",
    ),
    (
        now_job("w", callbacks={"on_success": {"kind": "python", "target": "nope"}}),
        "callbacks.on_success.target",
        "import path",
    ),
    (now_job("w", max_active_runs=0), "max_active_runs", "1 or more"),
    (now_job("w", depends_on_past="sometimes"), "depends_on_past", "valid boolean"),
    (
        now_job("w", task={"kind": "shell", "argv": ["x"], "pool": "gpu"}),
        "task.pool",
        "no pool 'gpu'; create it first with `tickwork pool set gpu --slots N`",
    ),
    (
        dag("w", sh("a"), sh("b", "a", pool="db", pool_slots=3)),
        "tasks[1].pool_slots",
        "asks for 3 slots but pool 'db' has 2",
    ),
    (
        dag(
            "w",
            sh("a"),
            sh("b"),
            {
                "kind": "python",
                "name": "c",
                "target": "m:f",
                "upstream": ["a"],
                "kwargs": {"x": {"$result": "b"}},
            },
        ),
        "tasks[2].kwargs.x",
        "uses the result of 'b', which is not an upstream of task 'c'",
    ),
]


@pytest.mark.parametrize(("body", "field", "says"), BAD_DAGS)
async def test_a_bad_dag_is_refused_naming_the_field_and_nothing_is_written(
    api: httpx2.AsyncClient, body: dict[str, Any], field: str, says: str
) -> None:
    await _pool(api, "db", 2)
    r = await api.post(f"{API}/jobs", json=body)
    assert r.status_code == 422, r.text
    error = error_of(r)
    assert (error["field"], says in error["message"]) == (field, True), error
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []
    assert (await api.get(f"{API}/runs")).json()["runs"] == []


async def test_a_batch_names_the_job_whose_pool_is_missing(api: httpx2.AsyncClient) -> None:
    jobs = [now_job("ok"), dag("bad", sh("a"), sh("b", "a", pool="db"))]
    r = await api.post(f"{API}/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "jobs[1].tasks[1].pool"
    assert (await api.get(f"{API}/jobs")).json()["jobs"] == []


async def test_patch_sets_and_clears_the_dag_fields(api: httpx2.AsyncClient) -> None:
    assert (await api.post(f"{API}/jobs", json=now_job("n"))).status_code == 201
    body = {"max_active_runs": 2, "depends_on_past": True, "callbacks": {"on_failure": HOOK}}
    job = (await api.patch(f"{API}/jobs/n", json=body)).json()
    assert (job["max_active_runs"], job["depends_on_past"], job["callbacks"]) == (
        2,
        True,
        {"on_failure": HOOK},
    )
    cleared: dict[str, Any] = {"max_active_runs": None, "callbacks": {}}
    job = (await api.patch(f"{API}/jobs/n", json=cleared)).json()
    assert (job["max_active_runs"], job["depends_on_past"], job["callbacks"]) == (None, True, {})
    r = await api.patch(f"{API}/jobs/n", json={"task": sh("main", pool="nope")})
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "task.pool"


# -- who may save what -------------------------------------------------------------------------


@pytest.fixture
async def writer(app: Any, security: Security) -> AsyncIterator[httpx2.AsyncClient]:
    """A client with a `write` token."""
    secret = (await security.tokens.create("writer", Scope.WRITE)).secret
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t.test", headers=headers
    ) as client:
        yield client


HTTP_TASK = {"kind": "http", "url": "https://example.org/health"}
PY_HOOK = {"kind": "python", "target": "tests.fixtures.tasks:noop"}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (now_job("j", task={**HTTP_TASK, "callbacks": {"on_failure": HOOK}}), 201),
        (now_job("j", task=HTTP_TASK, callbacks={"on_failure": HOOK}), 201),
        (now_job("j", task={**HTTP_TASK, "callbacks": {"on_failure": PY_HOOK}}), 403),
        (now_job("j", task=HTTP_TASK, callbacks={"on_retry": PY_HOOK}), 403),
    ],
)
async def test_python_callbacks_need_admin(
    writer: httpx2.AsyncClient, body: dict[str, Any], expected: int
) -> None:
    r = await writer.post(f"{API}/jobs", json=body)
    assert r.status_code == expected, r.text
    if expected == 403:
        assert "needs an `admin` token to save python callbacks" in error_of(r)["message"]
        assert (await writer.get(f"{API}/jobs")).json()["jobs"] == []


async def test_patch_into_a_python_callback_needs_admin(
    writer: httpx2.AsyncClient, api: httpx2.AsyncClient
) -> None:
    assert (await writer.post(f"{API}/jobs", json=now_job("j", task=HTTP_TASK))).status_code == 201
    r = await writer.patch(f"{API}/jobs/j", json={"callbacks": {"on_failure": PY_HOOK}})
    assert r.status_code == 403, r.text
    assert (
        await api.patch(f"{API}/jobs/j", json={"callbacks": {"on_failure": PY_HOOK}})
    ).is_success
    r = await writer.patch(f"{API}/jobs/j", json={"priority": 1})
    assert r.status_code == 403, r.text  # the job runs python code now


# -- the SSRF guard covers webhooks ------------------------------------------------------------


@pytest.fixture
async def guarded(
    store: SqlStore, broker: MemoryBroker, clock: FakeClock
) -> AsyncIterator[httpx2.AsyncClient]:
    async def no_names(host: str, port: int) -> list[str]:
        raise OSError(f"{host}: no such name")

    services = Services(store, broker, clock=clock, url_guard=UrlGuard(resolve=no_names).check)
    security = Security.over(services, clock=clock)
    admin = (await security.tokens.create("admin", Scope.ADMIN)).secret
    transport = httpx2.ASGITransport(app=create_app(services, security=security))
    headers = {"Authorization": f"Bearer {admin}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t.test", headers=headers
    ) as client:
        yield client


LOOPBACK = {"kind": "http", "url": "http://127.0.0.1:8080/hook"}
PUBLIC = {"kind": "http", "url": "http://93.184.215.14/hook"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (now_job("j", callbacks={"on_failure": LOOPBACK}), "callbacks.on_failure.url"),
        (
            now_job(
                "j", task={"kind": "shell", "argv": ["x"], "callbacks": {"on_retry": LOOPBACK}}
            ),
            "task.callbacks.on_retry.url",
        ),
        (
            dag("j", sh("a"), sh("b", "a", callbacks={"on_success": LOOPBACK})),
            "tasks[1].callbacks.on_success.url",
        ),
    ],
)
async def test_a_webhook_to_a_private_address_is_refused_on_save(
    guarded: httpx2.AsyncClient, body: dict[str, Any], field: str
) -> None:
    r = await guarded.post(f"{API}/jobs", json=body)
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == field
    assert "loopback" in error_of(r)["message"]
    assert (await guarded.get(f"{API}/jobs")).json()["jobs"] == []
    public = now_job("ok", callbacks={"on_failure": PUBLIC})
    assert (await guarded.post(f"{API}/jobs", json=public)).status_code == 201
