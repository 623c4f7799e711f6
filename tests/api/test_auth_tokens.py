"""Tokens through the API: create, list, revoke; hashing at rest; the bootstrap file; and the
SSRF guard when a job is saved."""

from __future__ import annotations

import asyncio
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa

from tests.api.conftest import error_of, now_job
from tests.helpers import FakeClock, eventually
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app import tokens as tokens_module
from tickwork.app.services import Services
from tickwork.app.tokens import CACHE_SECONDS, TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.ports import ApiToken, Scope
from tickwork.security.ssrf import UrlGuard
from tickwork.store import SqlStore


def _client(app: object, secret: str | None = None) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    transport = httpx2.ASGITransport(app=app)  # type: ignore[arg-type]
    return httpx2.AsyncClient(transport=transport, base_url="http://t.test", headers=headers)


async def test_create_list_and_revoke_through_the_api(api: httpx2.AsyncClient, app: object) -> None:
    r = await api.post("/api/v1/tokens", json={"name": "ci", "scope": "write"})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["secret"].startswith(f"tw_{created['id']}_")
    listed = (await api.get("/api/v1/tokens")).json()["tokens"]
    assert sorted(t["name"] for t in listed) == ["ci", "test-admin"]
    assert all("secret" not in t and "secret_hash" not in t for t in listed)
    async with _client(app, created["secret"]) as ci:
        assert (await ci.get("/api/v1/jobs")).status_code == 200
        r = await api.delete("/api/v1/tokens/ci")
        assert r.status_code == 200 and r.json()["revoked_at"] is not None
        assert (await ci.get("/api/v1/jobs")).status_code == 401  # same process: at once
    assert (await api.delete("/api/v1/tokens/ci")).status_code == 404


async def test_duplicate_live_names_conflict_and_bad_input_is_422(
    api: httpx2.AsyncClient,
) -> None:
    assert (await api.post("/api/v1/tokens", json={"name": "a", "scope": "read"})).is_success
    r = await api.post("/api/v1/tokens", json={"name": "a", "scope": "read"})
    assert r.status_code == 409 and error_of(r)["field"] == "name"
    r = await api.post("/api/v1/tokens", json={"name": "b", "scope": "root"})
    assert r.status_code == 422 and error_of(r)["field"] == "scope"
    r = await api.post("/api/v1/tokens", json={"name": "has space", "scope": "read"})
    assert r.status_code == 422 and error_of(r)["field"] == "name"


async def test_the_secret_is_stored_only_as_a_hash(store: SqlStore, clock: FakeClock) -> None:
    issued = await TokenService(store, clock).create("x", Scope.READ)
    secret_part = issued.secret.split("_", 2)[2]  # tw_<id>_<secret>: the secret may hold "_"

    def dump(conn: sa.Connection) -> str:
        return repr(conn.execute(sa.text("SELECT * FROM api_tokens")).all())

    stored = await store._read(dump)
    assert issued.token.id in stored
    assert secret_part not in stored and issued.secret not in stored


async def test_revocation_reaches_other_processes_within_the_cache_time(
    store: SqlStore, clock: FakeClock
) -> None:
    here, there = TokenService(store, clock), TokenService(store, clock)
    issued = await here.create("x", Scope.READ)
    assert await there.authenticate(issued.secret) is not None
    await here.revoke("x")
    deadline = time.monotonic() + CACHE_SECONDS + 2
    while await there.authenticate(issued.secret) is not None:
        assert time.monotonic() < deadline, "revoked token still accepted"
        await asyncio.sleep(0.05)


class GatedReads:
    """A token store whose ``get_token`` waits for ``gate`` (and counts the reads)."""

    def __init__(self, store: SqlStore) -> None:
        self._store, self.gate, self.reads, self.done = store, asyncio.Event(), 0, 0

    async def get_token(self, token_id: str) -> ApiToken | None:
        self.reads += 1
        await self.gate.wait()
        try:
            return await self._store.get_token(token_id)
        finally:
            self.done += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_token_in_use_is_read_again_without_a_request_waiting_for_it(
    store: SqlStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens_module, "REFRESH_AFTER", 0.0)  # every use reads it again
    gated = GatedReads(store)
    there, here = TokenService(gated, clock), TokenService(store, clock)
    issued = await here.create("x", Scope.READ)
    gated.gate.set()
    assert await there.authenticate(issued.secret) is not None
    gated.gate.clear()  # the store's reads hang from now on
    assert await asyncio.wait_for(there.authenticate(issued.secret), 5) is not None
    assert await asyncio.wait_for(there.authenticate(issued.secret), 5) is not None
    assert gated.reads == 2  # the first use and one read in the background, not one per use
    await here.revoke("x")
    gated.gate.set()  # the background read comes back with the revocation
    await eventually(lambda: there.authenticate(issued.secret), lambda token: token is None)


async def test_a_read_in_flight_does_not_bring_back_a_token_revoked_meanwhile(
    store: SqlStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens_module, "REFRESH_AFTER", 0.0)
    gated = GatedReads(store)
    tokens = TokenService(gated, clock)
    issued = await tokens.create("x", Scope.READ)
    gated.gate.set()
    assert await tokens.authenticate(issued.secret) is not None
    gated.gate.clear()
    assert await tokens.authenticate(issued.secret) is not None  # starts a read, which waits
    await tokens.revoke("x")  # same process: refused at once, whatever the read brings back
    gated.gate.set()

    async def reads_done() -> int:
        return gated.done

    await eventually(reads_done, lambda done: done == 2)
    assert await tokens.authenticate(issued.secret) is None


async def test_last_used_at_is_recorded(store: SqlStore, clock: FakeClock) -> None:
    tokens = TokenService(store, clock)
    issued = await tokens.create("x", Scope.READ)
    await tokens.authenticate(issued.secret)
    stored = await store.get_token(issued.token.id)
    assert stored is not None and stored.last_used_at == clock()


async def test_bootstrap_writes_a_private_admin_token_once(
    store: SqlStore, clock: FakeClock, tmp_path: Path
) -> None:
    tokens = TokenService(store, clock)
    path = await tokens.bootstrap(tmp_path / "data")
    assert path == tmp_path / "data" / "admin.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_text().strip()
    token = await tokens.authenticate(secret)
    assert token is not None and token.scope is Scope.ADMIN
    assert await TokenService(store, clock).bootstrap(tmp_path / "data") == path
    assert path.read_text().strip() == secret
    assert len(await store.list_tokens()) == 1


# -- SSRF on save ------------------------------------------------------------------------------


async def _no_names(host: str, port: int) -> list[str]:
    raise OSError(f"{host}: no such name")


@pytest.fixture
async def guarded(
    store: SqlStore, broker: MemoryBroker, clock: FakeClock
) -> AsyncIterator[httpx2.AsyncClient]:
    services = Services(store, broker, clock=clock, url_guard=UrlGuard(resolve=_no_names).check)
    security = Security.over(services, clock=clock)
    admin = await security.tokens.create("admin", Scope.ADMIN)
    async with _client(create_app(services, security=security), admin.secret) as client:
        yield client


def _http_job(name: str, url: str) -> dict[str, object]:
    return now_job(name, task={"kind": "http", "url": url})


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/healthz", "http://[::1]/", "http://0x7f.1/", "https://x.invalid"]
)
async def test_a_loopback_or_unresolvable_http_job_is_refused_on_save(
    guarded: httpx2.AsyncClient, url: str
) -> None:
    r = await guarded.post("/api/v1/jobs", json=_http_job("ping", url))
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "task.url"
    assert (await guarded.get("/api/v1/jobs")).json()["jobs"] == []


async def test_the_batch_names_the_job_whose_url_is_refused(guarded: httpx2.AsyncClient) -> None:
    jobs = [_http_job("ok", "http://93.184.215.14/"), _http_job("bad", "http://10.0.0.1/")]
    r = await guarded.post("/api/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 422, r.text
    assert error_of(r)["field"] == "jobs[1].task.url"
    assert "private" in error_of(r)["message"]
    assert (await guarded.get("/api/v1/jobs")).json()["jobs"] == []
