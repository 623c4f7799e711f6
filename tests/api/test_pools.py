"""Pools through the API: create, resize, list with the slots in use, read, delete."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from tests.api.conftest import NOW, error_of, now_job
from tickwork.store import SqlStore

API = "/api/v1"


async def test_put_creates_then_resizes_a_pool(api: httpx2.AsyncClient) -> None:
    r = await api.put(f"{API}/pools/db", json={"slots": 4, "description": "the warehouse"})
    assert r.status_code == 201, r.text
    assert r.json() == {"name": "db", "slots": 4, "used": 0, "description": "the warehouse"}
    r = await api.put(f"{API}/pools/db", json={"slots": 2})
    assert r.status_code == 200, r.text
    assert r.json() == {"name": "db", "slots": 2, "used": 0, "description": "the warehouse"}
    r = await api.put(f"{API}/pools/db", json={"slots": 3, "description": ""})
    assert r.json() == {"name": "db", "slots": 3, "used": 0, "description": ""}
    assert (await api.get(f"{API}/pools/db")).json()["slots"] == 3


async def test_list_shows_every_pool_by_name_with_the_slots_in_use(
    api: httpx2.AsyncClient, store: SqlStore
) -> None:
    for name, slots in (("gpu", 1), ("db", 4)):
        assert (await api.put(f"{API}/pools/{name}", json={"slots": slots})).status_code == 201
    task = {"kind": "shell", "argv": ["true"], "pool": "db", "pool_slots": 3}
    assert (await api.post(f"{API}/jobs", json=now_job("load", task=task))).status_code == 201
    run = (await api.get(f"{API}/runs", params={"job": "load"})).json()["runs"][0]
    [task_run] = (await api.get(f"{API}/runs/{run['id']}")).json()["task_runs"]
    if task_run["state"] == "scheduled":  # queue it, as the scheduler does when the pool has room
        assert await store.mark_queued([(task_run["id"], 1)], NOW)
    pools = (await api.get(f"{API}/pools")).json()["pools"]
    assert [(p["name"], p["slots"], p["used"]) for p in pools] == [("db", 4, 3), ("gpu", 1, 0)]
    assert (await api.get(f"{API}/pools/db")).json()["used"] == 3


async def test_delete_removes_a_pool_and_a_second_delete_is_404(api: httpx2.AsyncClient) -> None:
    await api.put(f"{API}/pools/db", json={"slots": 1})
    assert (await api.delete(f"{API}/pools/db")).status_code == 204
    assert (await api.get(f"{API}/pools")).json()["pools"] == []
    for r in (await api.delete(f"{API}/pools/db"), await api.get(f"{API}/pools/db")):
        assert r.status_code == 404, r.text
        assert error_of(r) == {"code": "not_found", "message": "no pool 'db'", "field": "pool"}


async def test_a_job_may_name_a_pool_only_while_it_exists(api: httpx2.AsyncClient) -> None:
    task = {"kind": "shell", "argv": ["true"], "pool": "db"}
    r = await api.post(f"{API}/jobs", json=now_job("a", task=task))
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "task.pool"
    await api.put(f"{API}/pools/db", json={"slots": 1})
    assert (await api.post(f"{API}/jobs", json=now_job("a", task=task))).status_code == 201


@pytest.mark.parametrize(
    ("name", "body", "field", "says"),
    [
        ("db", {"slots": 0}, "slots", "from 1 to 1000000"),
        ("db", {"slots": 1_000_001}, "slots", "from 1 to 1000000"),
        ("db", {"slots": "many"}, "slots", "must be a whole number"),
        ("db", {}, "slots", "Field required"),
        ("db", {"slots": 1, "colour": "red"}, "colour", "Extra inputs"),
        ("db", {"slots": 1, "description": "x" * 1001}, "description", "at most 1000"),
        ("db", {"slots": 1, "description": "\u0000"}, "description", "NUL character"),
        ("-db", {"slots": 1}, "name", "is not a valid name"),
    ],
)
async def test_bad_pools_are_refused_and_nothing_is_written(
    api: httpx2.AsyncClient, name: str, body: dict[str, Any], field: str, says: str
) -> None:
    r = await api.put(f"{API}/pools/{name}", json=body)
    assert r.status_code == 422, r.text
    error = error_of(r)
    assert (error["field"], says in error["message"]) == (field, True), error
    assert (await api.get(f"{API}/pools")).json()["pools"] == []
