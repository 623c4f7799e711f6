"""Enqueue: runs of an existing job with per-run params (``POST /jobs/{name}/runs[/batch]``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx2
import pytest

from tests.api.conftest import cron_job, drain, error_of
from tests.helpers import FakeClock, Wakes
from tickwork.app.job_changes import PARAMS_ENV
from tickwork.broker.memory import MemoryBroker
from tickwork.store import SqlStore

API = "/api/v1"
PY = {"kind": "python", "target": "tests.fixtures.tasks:noop", "kwargs": {"a": 1, "b": 2}}
#: The params the test jobs declare (``b`` cannot be one: it is a stored kwarg).
PARAMS = {"properties": {name: {"type": "integer"} for name in ("c", "n", "x")}}


def py_job(name: str = "work", **extra: Any) -> dict[str, Any]:
    return {**cron_job(name), "task": PY, "params": PARAMS, **extra}


def dag_job(name: str = "flow") -> dict[str, Any]:
    body = py_job(name)
    del body["task"]
    tasks = [
        {**PY, "name": "first"},
        {"kind": "shell", "name": "second", "argv": ["true"], "upstream": ["first"]},
    ]
    return {**body, "tasks": tasks}


async def _run(api: httpx2.AsyncClient, run_id: str) -> dict[str, Any]:
    r = await api.get(f"{API}/runs/{run_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def _runs_of(api: httpx2.AsyncClient, job: str) -> list[dict[str, Any]]:
    r = await api.get(f"{API}/runs", params={"job": job, "limit": 1000})
    runs: list[dict[str, Any]] = r.json()["runs"]
    return runs


async def test_enqueue_one_run_adds_declared_params_and_queues_it(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    assert (await api.post(f"{API}/jobs", json=py_job())).status_code == 201
    # A param that would replace a stored kwarg is not declared, so it is refused.
    r = await api.post(f"{API}/jobs/work/runs", json={"params": {"b": 3}})
    assert (r.status_code, error_of(r)["field"]) == (422, "params.b")
    r = await api.post(f"{API}/jobs/work/runs", json={"params": {"c": 4}, "priority": 7})
    assert r.status_code == 201, r.text
    done = r.json()
    assert set(done) == {"run_id", "task_run_ids"}
    run = await _run(api, done["run_id"])
    assert (run["trigger"], run["state"], run["logical_date"]) == (
        "enqueue", "queued", "2026-06-01T12:00:00Z",
    )  # fmt: skip
    (task_run,) = run["task_runs"]
    assert task_run["id"] == done["task_run_ids"][0]
    assert task_run["config"]["kwargs"] == {"a": 1, "b": 2, "c": 4}
    assert task_run["priority"] == 7
    (delivery,) = await drain(broker)
    assert (delivery.task_run_id, delivery.attempt, delivery.priority) == (task_run["id"], 1, 7)


async def test_enqueued_runs_may_share_a_logical_date(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    ids = [(await api.post(f"{API}/jobs/work/runs")).json()["run_id"] for _ in range(3)]
    batch = await api.post(f"{API}/jobs/work/runs/batch", json={"items": [{}, {}]})
    assert batch.status_code == 201, batch.text
    ids += batch.json()["run_ids"]
    runs = await _runs_of(api, "work")
    assert sorted(r["id"] for r in runs) == sorted(ids) and len(set(ids)) == 5
    assert {r["logical_date"] for r in runs} == {"2026-06-01T12:00:00Z"}
    # A manual trigger at that instant is still one of a kind.
    body = {"logical_date": "2026-06-01T12:00:00Z"}
    assert (await api.post(f"{API}/jobs/work/trigger", json=body)).status_code == 201
    again = await api.post(f"{API}/jobs/work/trigger", json=body)
    assert again.status_code == 409


async def test_each_enqueue_has_its_own_instants_though_the_job_is_planned_once(
    api: httpx2.AsyncClient, clock: FakeClock
) -> None:
    await api.post(f"{API}/jobs", json=dag_job())
    first = (await api.post(f"{API}/jobs/flow/runs")).json()["run_id"]
    clock.now += timedelta(seconds=5)  # the same job version: its planned run is reused
    second = (await api.post(f"{API}/jobs/flow/runs", json={"params": {"c": 1}})).json()
    later = await api.post(f"{API}/jobs/flow/runs", json={"delay": 60})
    instants = []
    for run_id in (first, second["run_id"], later.json()["run_id"]):
        run = await _run(api, run_id)
        by_name = {tr["task_name"]: tr for tr in run["task_runs"]}
        root, child = by_name["first"], by_name["second"]
        own = (run["logical_date"], root["due_at"], root["queued_at"], child["due_at"])
        instants.append((*own, child["state"]))
    t0, t5, t65 = "2026-06-01T12:00:00Z", "2026-06-01T12:00:05Z", "2026-06-01T12:01:05Z"
    assert instants == [
        (t0, t0, t0, t0, "pending"),
        (t5, t5, t5, t5, "pending"),
        (t5, t65, None, t65, "pending"),
    ]


async def test_batch_answers_ids_in_item_order_with_each_items_params(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    items = [{"params": {"n": i}} for i in range(5)]
    r = await api.post(f"{API}/jobs/work/runs/batch", json={"items": items})
    assert r.status_code == 201, r.text
    assert set(r.json()) == {"run_ids"}
    run_ids = r.json()["run_ids"]
    for i, run_id in enumerate(run_ids):
        (task_run,) = (await _run(api, run_id))["task_runs"]
        assert task_run["config"]["kwargs"] == {"a": 1, "b": 2, "n": i}
    assert len(await drain(broker)) == 5


async def test_a_dag_job_gets_params_in_every_task_as_trigger_does(
    api: httpx2.AsyncClient, broker: MemoryBroker
) -> None:
    assert (await api.post(f"{API}/jobs", json=dag_job())).status_code == 201
    r = await api.post(f"{API}/jobs/flow/runs/batch", json={"items": [{"params": {"x": 1}}]})
    assert r.status_code == 201, r.text
    run = await _run(api, r.json()["run_ids"][0])
    by_name = {tr["task_name"]: tr for tr in run["task_runs"]}
    assert by_name["first"]["state"] == "queued"
    assert by_name["first"]["config"]["kwargs"] == {"a": 1, "b": 2, "x": 1}
    assert by_name["second"]["state"] == "pending"
    assert by_name["second"]["config"]["env"] == {PARAMS_ENV: '{"x": 1}'}
    assert [d.task_run_id for d in await drain(broker)] == [by_name["first"]["id"]]
    triggered = await api.post(f"{API}/jobs/flow/trigger", json={"params": {"x": 1}})
    trigger_configs = {tr["task_name"]: tr["config"] for tr in triggered.json()["task_runs"]}
    assert trigger_configs == {name: tr["config"] for name, tr in by_name.items()}


async def test_at_or_delay_makes_the_run_wait_for_the_scheduler(
    api: httpx2.AsyncClient, broker: MemoryBroker, wakes: Wakes
) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    before = wakes.count
    items = [{"delay": 30}, {"at": "2026-06-01T13:00:00Z"}, {"at": "2020-01-01T00:00:00Z"}]
    r = await api.post(f"{API}/jobs/work/runs/batch", json={"items": items})
    assert r.status_code == 201, r.text
    runs = [await _run(api, run_id) for run_id in r.json()["run_ids"]]
    assert [run["state"] for run in runs] == ["scheduled", "scheduled", "queued"]
    dues = [run["task_runs"][0]["due_at"] for run in runs]
    assert dues == ["2026-06-01T12:00:30Z", "2026-06-01T13:00:00Z", "2026-06-01T12:00:00Z"]
    assert [d.task_run_id for d in await drain(broker)] == [runs[2]["task_runs"][0]["id"]]
    assert wakes.count == before + 1


async def test_a_paused_job_still_gets_its_enqueued_runs(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    await api.post(f"{API}/jobs/work/pause")
    r = await api.post(f"{API}/jobs/work/runs")
    assert r.status_code == 201, r.text
    assert (await _run(api, r.json()["run_id"]))["state"] == "queued"


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([{}, {"params": [1, 2]}], "items[1].params"),
        ([{"priority": 101}], "items[0].priority"),
        ([{}, {}, {"priority": "high"}], "items[2].priority"),
        ([{"at": "2026-06-01T13:00:00"}], "items[0].at"),
        ([{"delay": -1}], "items[0].delay"),
        ([{"delay": 1, "at": "2026-06-01T13:00:00Z"}], "items[0].delay"),
        ([{"param": {}}], "items[0].param"),
        ([], "items"),
        ([{}] * 5001, "items"),
    ],
)
async def test_bad_items_are_refused_with_the_field_and_nothing_is_written(
    api: httpx2.AsyncClient, broker: MemoryBroker, items: list[dict[str, Any]], field: str
) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    r = await api.post(f"{API}/jobs/work/runs/batch", json={"items": items})
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == field
    assert await _runs_of(api, "work") == []
    assert await drain(broker) == []


async def test_single_enqueue_errors_name_the_bare_field(api: httpx2.AsyncClient) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    r = await api.post(f"{API}/jobs/work/runs", json={"params": "x"})
    assert (r.status_code, error_of(r)["field"]) == (422, "params")
    r = await api.post(f"{API}/jobs/work/runs", json={"delay": 1, "at": "2027-01-01T00:00:00Z"})
    assert (r.status_code, error_of(r)["field"]) == (422, "delay")


async def test_unknown_job_is_404(api: httpx2.AsyncClient) -> None:
    assert (await api.post(f"{API}/jobs/nope/runs")).status_code == 404
    r = await api.post(f"{API}/jobs/nope/runs/batch", json={"items": [{}]})
    assert r.status_code == 404
    assert error_of(r)["code"] == "not_found"


async def test_idempotency_key_replays_the_ids_and_writes_once(
    api: httpx2.AsyncClient, store: SqlStore
) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    key = {"Idempotency-Key": "enq-1"}
    body = {"items": [{"params": {"n": 1}}, {"params": {"n": 2}}]}
    first = await api.post(f"{API}/jobs/work/runs/batch", json=body, headers=key)
    assert first.status_code == 201, first.text
    again = await api.post(f"{API}/jobs/work/runs/batch", json=body, headers=key)
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert len(await _runs_of(api, "work")) == 2
    other = await api.post(f"{API}/jobs/work/runs/batch", json={"items": [{}]}, headers=key)
    assert other.status_code == 409
    one = {"Idempotency-Key": "enq-2"}
    single = await api.post(f"{API}/jobs/work/runs", json={}, headers=one)
    assert (await api.post(f"{API}/jobs/work/runs", json={}, headers=one)).json() == single.json()
    assert len(await _runs_of(api, "work")) == 3


async def test_a_changed_or_deleted_job_is_read_again(
    api: httpx2.AsyncClient, clock: FakeClock
) -> None:
    await api.post(f"{API}/jobs", json=py_job())
    assert (await api.post(f"{API}/jobs/work/runs")).status_code == 201  # the job is cached
    clock.now += timedelta(seconds=1)  # a change is known by its updated_at
    changed = {"task": {**PY, "kwargs": {"a": 9}}}
    assert (await api.patch(f"{API}/jobs/work", json=changed)).status_code == 200
    r = await api.post(f"{API}/jobs/work/runs", json={"params": {"c": 1}})
    (task_run,) = (await _run(api, r.json()["run_id"]))["task_runs"]
    assert task_run["config"]["kwargs"] == {"a": 9, "c": 1}
    assert (await api.delete(f"{API}/jobs/work")).status_code == 204
    assert (await api.post(f"{API}/jobs/work/runs")).status_code == 404
    await api.post(f"{API}/jobs", json=py_job())  # the same name, another job
    r = await api.post(f"{API}/jobs/work/runs")
    assert r.status_code == 201
    assert (await _run(api, r.json()["run_id"]))["task_runs"][0]["config"]["kwargs"] == PY["kwargs"]
