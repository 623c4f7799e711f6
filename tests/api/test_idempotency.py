"""``Idempotency-Key``: replay, 409 on a different body, expiry, per-token keys, concurrency
within one server and across several, and atomicity with the write (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta

import httpx2
import pytest

from tests.api.conftest import error_of, now_job
from tests.helpers import FakeClock
from tickwork.api.app import create_app
from tickwork.api.auth import DEFAULT_IDEMPOTENCY_TTL, Security
from tickwork.app.services import Services
from tickwork.app.settings import Settings
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import Delivery, Scope, Store
from tickwork.serve.wiring import api_app, wire
from tickwork.store import open_store

KEY = {"Idempotency-Key": "k-1"}


async def test_same_key_and_body_replays_the_first_response(api: httpx2.AsyncClient) -> None:
    first = await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)
    again = await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)
    assert first.status_code == again.status_code == 201, (first.text, again.text)
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert len((await api.get("/api/v1/runs")).json()["runs"]) == 1


async def test_same_key_with_another_body_is_409(api: httpx2.AsyncClient) -> None:
    assert (await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)).status_code == 201
    r = await api.post("/api/v1/jobs", json=now_job("b"), headers=KEY)
    assert r.status_code == 409
    assert error_of(r)["field"] == "Idempotency-Key"
    r = await api.post("/api/v1/jobs/batch", json={"jobs": [now_job("a")]}, headers=KEY)
    assert r.status_code == 409


async def test_trigger_and_batch_replay(api: httpx2.AsyncClient) -> None:
    batch = {"jobs": [now_job("a"), now_job("b")]}
    first = await api.post("/api/v1/jobs/batch", json=batch, headers=KEY)
    assert (await api.post("/api/v1/jobs/batch", json=batch, headers=KEY)).json() == first.json()
    key = {"Idempotency-Key": "t-1"}
    body = {"logical_date": "2026-05-01T00:00:00Z"}
    run = await api.post("/api/v1/jobs/a/trigger", json=body, headers=key)
    assert run.status_code == 201, run.text
    again = await api.post("/api/v1/jobs/a/trigger", json=body, headers=key)
    assert again.json() == run.json()
    assert len((await api.get("/api/v1/runs", params={"job": "a"})).json()["runs"]) == 2


async def test_a_failed_request_releases_its_key(api: httpx2.AsyncClient) -> None:
    bad = now_job("a", schedule={"kind": "cron", "cron": "nope"})
    assert (await api.post("/api/v1/jobs", json=bad, headers=KEY)).status_code == 422
    assert (await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)).status_code == 201


async def test_keys_expire(api: httpx2.AsyncClient, clock: FakeClock) -> None:
    assert (await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)).status_code == 201
    clock.now += DEFAULT_IDEMPOTENCY_TTL + timedelta(seconds=1)
    r = await api.post("/api/v1/jobs", json=now_job("b"), headers=KEY)
    assert r.status_code == 201, r.text


async def test_keys_are_per_token(api: httpx2.AsyncClient, security: Security) -> None:
    other = await security.tokens.create("other", Scope.ADMIN)
    assert (await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)).status_code == 201
    headers = {**KEY, "Authorization": f"Bearer {other.secret}"}
    r = await api.post("/api/v1/jobs", json=now_job("b"), headers=headers)
    assert r.status_code == 201, r.text


def _written_once(results: list[httpx2.Response]) -> None:
    """One response did the write, every other one replays it, all byte for byte the same."""
    assert [r.status_code for r in results] == [201] * len(results), [r.text for r in results]
    fresh = [r for r in results if "idempotent-replayed" not in r.headers]
    assert len(fresh) == 1
    assert {r.content for r in results} == {fresh[0].content}


async def test_concurrent_requests_with_one_key_create_once(api: httpx2.AsyncClient) -> None:
    results = await asyncio.gather(
        *(api.post("/api/v1/jobs", json=now_job("a"), headers=KEY) for _ in range(8))
    )
    _written_once(list(results))
    assert len((await api.get("/api/v1/runs")).json()["runs"]) == 1


@pytest.fixture
async def servers(
    store_url: str, store: Store, clock: FakeClock, admin_token: str
) -> AsyncIterator[list[httpx2.AsyncClient]]:
    """Three more API servers on the test's database, each with its own store (connections)."""
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for _ in range(3):
            other = await open_store(store_url)
            stack.push_async_callback(other.close)
            services = Services(other, MemoryBroker(), clock=clock)
            app = create_app(services, security=Security.over(services, clock=clock))
            client = httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=app),
                base_url="http://tickwork.test",
                headers={"Authorization": f"Bearer {admin_token}"},
            )
            clients.append(await stack.enter_async_context(client))
        yield clients


async def test_one_key_sent_to_several_servers_at_once_writes_once(
    api: httpx2.AsyncClient, servers: list[httpx2.AsyncClient]
) -> None:
    everyone = [api, *servers]
    created = await asyncio.gather(
        *(everyone[i % 4].post("/api/v1/jobs", json=now_job("a"), headers=KEY) for i in range(12))
    )
    _written_once(list(created))
    key, body = {"Idempotency-Key": "t-1"}, {"logical_date": "2026-05-01T00:00:00Z"}
    triggered = await asyncio.gather(
        *(everyone[i % 4].post("/api/v1/jobs/a/trigger", json=body, headers=key) for i in range(12))
    )
    _written_once(list(triggered))
    assert len((await api.get("/api/v1/runs", params={"job": "a"})).json()["runs"]) == 2


async def test_concurrent_requests_with_one_key_and_other_bodies_write_one(
    api: httpx2.AsyncClient, servers: list[httpx2.AsyncClient]
) -> None:
    everyone = [api, *servers]
    results = await asyncio.gather(
        *(everyone[i].post("/api/v1/jobs", json=now_job(f"j{i}"), headers=KEY) for i in range(4))
    )
    assert sorted(r.status_code for r in results) == [201, 409, 409, 409]
    for r in results:
        assert r.status_code == 201 or error_of(r)["field"] == "Idempotency-Key"
    assert len((await api.get("/api/v1/jobs")).json()["jobs"]) == 1


async def test_a_write_refused_by_the_store_keeps_no_key(api: httpx2.AsyncClient) -> None:
    assert (await api.post("/api/v1/jobs", json=now_job("a"))).status_code == 201
    taken = await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)
    assert (taken.status_code, error_of(taken)["field"]) == (409, "name")
    assert (await api.delete("/api/v1/jobs/a")).status_code == 204
    again = await api.post("/api/v1/jobs", json=now_job("a"), headers=KEY)
    assert again.status_code == 201, again.text
    assert "idempotent-replayed" not in again.headers


class BrokerDown(MemoryBroker):
    """A broker that fails every publish: the process dies right after the write commits."""

    async def publish(self, deliveries: Sequence[Delivery]) -> None:
        raise ConnectionError("broker down")


async def test_a_write_that_committed_is_replayed_even_if_the_request_then_failed(
    store: Store, clock: FakeClock, admin_token: str
) -> None:
    services = Services(store, BrokerDown(), clock=clock)
    app = create_app(services, security=Security.over(services, clock=clock))
    headers = {**KEY, "Authorization": f"Bearer {admin_token}"}
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url="http://t.test") as client:
        failed = await client.post("/api/v1/jobs", json=now_job("a"), headers=headers)
        assert failed.status_code == 500
        again = await client.post("/api/v1/jobs", json=now_job("a"), headers=headers)
        assert (again.status_code, again.headers["idempotent-replayed"]) == (201, "true")
        assert again.json()["name"] == "a"
        assert len((await client.get("/api/v1/runs", headers=headers)).json()["runs"]) == 1


async def test_a_replay_is_the_first_response_not_the_current_state(
    api: httpx2.AsyncClient,
) -> None:
    assert (await api.post("/api/v1/jobs", json=now_job("a"))).status_code == 201
    body = {"logical_date": "2026-05-01T00:00:00Z"}
    first = await api.post("/api/v1/jobs/a/trigger", json=body, headers=KEY)
    assert first.json()["state"] == "queued", first.text
    assert (await api.post(f"/api/v1/runs/{first.json()['id']}/cancel")).status_code == 200
    again = await api.post("/api/v1/jobs/a/trigger", json=body, headers=KEY)
    assert again.content == first.content


async def test_an_overlong_key_is_422(api: httpx2.AsyncClient) -> None:
    r = await api.post("/api/v1/jobs", json=now_job("a"), headers={"Idempotency-Key": "k" * 256})
    assert r.status_code == 422 and error_of(r)["field"] == "Idempotency-Key"


@pytest.mark.parametrize(("ttl", "second"), [(0.0, 201), (3600.0, 409)])
async def test_tickwork_up_keeps_keys_for_its_configured_time(
    store: Store, admin_token: str, ttl: float, second: int
) -> None:
    settings = Settings(idempotency_ttl=ttl)
    app = api_app(wire(store, settings).services, settings)
    headers = {**KEY, "Authorization": f"Bearer {admin_token}"}
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://t.test") as client:
        assert (await client.post("/api/v1/jobs", json=now_job("a"), headers=headers)).is_success
        r = await client.post("/api/v1/jobs", json=now_job("b"), headers=headers)
        assert r.status_code == second, r.text
