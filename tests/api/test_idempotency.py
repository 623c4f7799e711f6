"""``Idempotency-Key``: replay, 409 on a different body, expiry, per-token keys, concurrency
(SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx2

from tests.api.conftest import error_of, now_job
from tests.helpers import FakeClock
from tickwork.api.auth import DEFAULT_IDEMPOTENCY_TTL, Security
from tickwork.ports import Scope

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


async def test_concurrent_requests_with_one_key_create_once(api: httpx2.AsyncClient) -> None:
    results = await asyncio.gather(
        *(api.post("/api/v1/jobs", json=now_job("a"), headers=KEY) for _ in range(8))
    )
    statuses = sorted(r.status_code for r in results)
    assert statuses.count(201) >= 1
    assert set(statuses) <= {201, 409}, statuses
    for r in results:
        if r.status_code == 409:
            assert error_of(r)["field"] == "Idempotency-Key", r.text
    assert len((await api.get("/api/v1/runs")).json()["runs"]) == 1


async def test_an_overlong_key_is_422(api: httpx2.AsyncClient) -> None:
    r = await api.post("/api/v1/jobs", json=now_job("a"), headers={"Idempotency-Key": "k" * 256})
    assert r.status_code == 422 and error_of(r)["field"] == "Idempotency-Key"
