"""The SDK's search, update, trigger-params, dead-letter and task-run calls, against the
real app."""

from __future__ import annotations

from collections.abc import Iterator

import anyio.from_thread
import pytest

from tests.cli.conftest import PortalTransport
from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Scope
from tickwork.sdk import ApiError, Client
from tickwork.store import open_store


@pytest.fixture
def client(sqlite_url: str) -> Iterator[Client]:
    with anyio.from_thread.start_blocking_portal() as portal:
        store = portal.call(open_store, sqlite_url)
        transport = PortalTransport(portal, create_app(Services(store, MemoryBroker())))
        admin = portal.call(TokenService(store, utc_now).create, "sdk", Scope.ADMIN)
        try:
            with Client("http://tickwork.test", token=admin.secret, transport=transport) as tw:
                yield tw
        finally:
            portal.call(store.close)


def test_sdk_filters_updates_and_triggers_with_params(client: Client) -> None:
    task = {"kind": "python", "target": "tests.fixtures.tasks:noop"}
    for name, tags in (("etl-a", ["nightly"]), ("etl-b", []), ("web", [])):
        schedule = {"kind": "cron", "cron": "0 3 * * *", "timezone": "UTC"}
        params = {"properties": {"day": {"type": "string"}}}
        job = {"name": name, "schedule": schedule, "task": task, "tags": tags, "params": params}
        client.create_job(job)  # type: ignore[arg-type]
    assert [j["name"] for j in client.list_jobs(prefix="etl-")["jobs"]] == ["etl-a", "etl-b"]
    assert [j["name"] for j in client.list_jobs(tag="nightly")["jobs"]] == ["etl-a"]
    client.pause("web")
    assert [j["name"] for j in client.list_jobs(paused=True)["jobs"]] == ["web"]
    assert client.update_job("web", {"priority": 9})["priority"] == 9
    with pytest.raises(ApiError) as refused:
        client.update_job("web", {"name": "x"})
    assert (refused.value.status, refused.value.field) == (422, "name")
    run = client.trigger("etl-a", "2026-05-01T00:00:00Z", params={"day": "x"})
    assert run["task_runs"][0]["config"]["kwargs"] == {"day": "x"}
    window = client.list_runs(
        logical_from="2026-05-01T00:00:00Z", logical_to="2026-05-02T00:00:00Z"
    )
    assert [r["id"] for r in window["runs"]] == [run["id"]]
    assert client.dead_letters()["task_runs"] == []


def test_sdk_cancels_and_retries_one_task_run(client: Client) -> None:
    task = {"kind": "python", "target": "tests.fixtures.tasks:noop"}
    client.create_job({"name": "once", "schedule": {"kind": "now"}, "task": task})  # type: ignore[typeddict-item]
    [run] = client.list_runs(job="once")["runs"]
    task_run_id = client.get_run(run["id"])["task_runs"][0]["id"]
    with pytest.raises(ApiError) as queued:
        client.retry_task_run(task_run_id)
    assert (queued.value.status, queued.value.field) == (409, "task_run")
    assert "is queued" in queued.value.message
    cancelled = client.cancel_task_run(task_run_id)
    assert (cancelled["id"], cancelled["state"]) == (run["id"], "cancelled")
    assert client.retry_task_run(task_run_id)["task_runs"][0]["state"] == "scheduled"
    with pytest.raises(ApiError) as unknown:
        client.cancel_task_run("nope")
    assert (unknown.value.status, unknown.value.field) == (404, "task_run")
