"""Cancel and retry one task run: ``POST /task-runs/{id}/cancel`` and ``/retry``."""

from __future__ import annotations

from typing import Any

import httpx2

from tests.api.conftest import NOW, error_of, now_job
from tests.contract.factory import make_job, make_run, shell_task
from tests.helpers import Wakes
from tickwork.core.model import Outcome, TaskRunState
from tickwork.ports import Store

API = "/api/v1"


async def _run(api: httpx2.AsyncClient, store: Store) -> dict[str, Any]:
    """A run with tasks `a` and `b`, both queued. The API takes one-task jobs until DAGs run,
    so this one is written to the store directly, as the engine will write workflow runs."""
    job = make_job("two", tasks=[shell_task("a"), shell_task("b")])
    await store.create_jobs([(job, [])])
    new = make_run(job, state=TaskRunState.QUEUED)
    await store.create_runs([new])
    detail: dict[str, Any] = (await api.get(f"{API}/runs/{new.run.id}")).json()
    return detail


def _task(run: dict[str, Any], name: str) -> dict[str, Any]:
    [task_run] = [tr for tr in run["task_runs"] if tr["task_name"] == name]
    return dict(task_run)


async def _fail(store: Store, task_run: dict[str, Any]) -> None:
    """Let a worker run the task run's attempt and fail it for good."""
    key = (task_run["id"], task_run["attempt"])
    assert await store.claim([key], "w1", NOW)
    failed = Outcome(task_run["id"], task_run["attempt"], TaskRunState.FAILED, NOW, error="x")
    await store.complete([failed])
    stored = await store.get_task_run(task_run["id"])
    assert stored is not None and stored.state is TaskRunState.FAILED


async def test_cancel_a_queued_task_run_cancels_it_alone(
    api: httpx2.AsyncClient, store: Store
) -> None:
    run = await _run(api, store)
    r = await api.post(f"{API}/task-runs/{_task(run, 'a')['id']}/cancel")
    assert r.status_code == 200, r.text
    after = r.json()
    assert after["id"] == run["id"]
    assert (_task(after, "a")["state"], _task(after, "b")["state"]) == ("cancelled", "queued")
    assert after["state"] == "running"  # derived again: one task over, one to go
    assert (await api.get(f"{API}/runs/{run['id']}")).json() == after


async def test_cancel_a_finished_task_run_is_409_naming_its_state(
    api: httpx2.AsyncClient, store: Store
) -> None:
    run = await _run(api, store)
    task_id = _task(run, "a")["id"]
    await api.post(f"{API}/task-runs/{task_id}/cancel")
    before = (await api.get(f"{API}/runs/{run['id']}")).json()
    r = await api.post(f"{API}/task-runs/{task_id}/cancel")
    assert r.status_code == 409
    error = error_of(r)
    assert (error["code"], error["field"]) == ("conflict", "task_run")
    assert "already finished (cancelled)" in error["message"]
    assert (await api.get(f"{API}/runs/{run['id']}")).json() == before


async def test_cancel_a_running_task_run_asks_its_worker_to_kill_it(
    api: httpx2.AsyncClient, store: Store
) -> None:
    run = await _run(api, store)
    task_run = _task(run, "a")
    key = (task_run["id"], task_run["attempt"])
    assert await store.claim([key], "w1", NOW)
    r = await api.post(f"{API}/task-runs/{task_run['id']}/cancel")
    assert r.status_code == 200, r.text
    cancelling = _task(r.json(), "a")
    assert (cancelling["state"], cancelling["cancel_requested"]) == ("running", True)
    assert _task(r.json(), "b")["state"] == "queued"
    assert (await store.heartbeat([key], "w1", NOW)).cancelled == {task_run["id"]}


async def test_retry_a_dead_letter_schedules_one_more_attempt_now(
    api: httpx2.AsyncClient, store: Store, wakes: Wakes
) -> None:
    run = await _run(api, store)
    await _fail(store, _task(run, "a"))
    await _fail(store, _task(run, "b"))
    before = wakes.count
    r = await api.post(f"{API}/task-runs/{_task(run, 'a')['id']}/retry")
    assert r.status_code == 200, r.text
    retried, left = _task(r.json(), "a"), _task(r.json(), "b")
    assert (retried["state"], retried["attempt"], retried["retry"]["max_attempts"]) == (
        "scheduled",
        2,
        2,
    )
    assert retried["due_at"] == "2026-06-01T12:00:00Z"
    assert (left["state"], left["attempt"]) == ("failed", 1)
    assert r.json()["state"] == "running"
    assert wakes.count == before + 1
    dead = (await api.get(f"{API}/dead-letters")).json()["task_runs"]
    assert [tr["id"] for tr in dead] == [left["id"]]


async def test_retry_a_task_run_that_is_not_dead_is_409_and_changes_nothing(
    api: httpx2.AsyncClient, store: Store, wakes: Wakes
) -> None:
    run = await _run(api, store)
    before = wakes.count
    r = await api.post(f"{API}/task-runs/{_task(run, 'a')['id']}/retry")
    assert r.status_code == 409
    error = error_of(r)
    assert (error["code"], error["field"]) == ("conflict", "task_run")
    assert " is queued; only cancelled, failed, upstream_failed can be retried" in error["message"]
    assert (await api.get(f"{API}/runs/{run['id']}")).json() == run
    assert wakes.count == before


async def test_cancel_then_retry_one_task_run_of_a_cancelled_run(
    api: httpx2.AsyncClient, store: Store
) -> None:
    run = await _run(api, store)
    assert (await api.post(f"{API}/runs/{run['id']}/cancel")).json()["state"] == "cancelled"
    r = await api.post(f"{API}/task-runs/{_task(run, 'b')['id']}/retry")
    assert r.status_code == 200, r.text
    assert (_task(r.json(), "a")["state"], _task(r.json(), "b")["state"]) == (
        "cancelled",
        "scheduled",
    )
    assert (r.json()["state"], r.json()["finished_at"]) == ("running", None)


async def test_the_task_run_of_a_job_made_through_the_api(api: httpx2.AsyncClient) -> None:
    assert (await api.post(f"{API}/jobs", json=now_job("one"))).status_code == 201
    [run] = (await api.get(f"{API}/runs")).json()["runs"]
    [task_run] = (await api.get(f"{API}/runs/{run['id']}")).json()["task_runs"]
    cancelled = await api.post(f"{API}/task-runs/{task_run['id']}/cancel")
    assert cancelled.json()["state"] == "cancelled", cancelled.text
    retried = (await api.post(f"{API}/task-runs/{task_run['id']}/retry")).json()
    assert (retried["state"], retried["task_runs"][0]["attempt"]) == ("scheduled", 2)


async def test_unknown_task_run_is_404(api: httpx2.AsyncClient) -> None:
    for action in ("cancel", "retry"):
        r = await api.post(f"{API}/task-runs/nope/{action}")
        assert r.status_code == 404, r.text
        error = error_of(r)
        assert (error["code"], error["field"]) == ("not_found", "task_run")
        assert error["message"] == "no task_run 'nope'"
