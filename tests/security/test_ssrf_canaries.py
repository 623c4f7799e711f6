"""SSRF canaries: every spelling of a loopback or private target is refused, on save (422)
and at send time, directly, through DNS, through IPv6 forms that lead to IPv4 (mapped,
6to4, NAT64, Teredo) and through redirects (never followed)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest

from tests.fixtures.http_server import ServerState, serve_http
from tests.fixtures.sinks import MemorySink
from tests.fixtures.task_runs import make_task_run
from tests.helpers import FakeClock
from tests.unit.runtime.test_ssrf import INTERNAL, Table
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import TaskKind
from tickwork.ports import Scope
from tickwork.security.ssrf import TargetRefused, UrlGuard, embedded_ipv4, parse_allow
from tickwork.serve.wiring import runner_guard
from tickwork.store import SqlStore
from tickwork.worker.runners import HttpRunner

#: IPv6 spellings that lead to an internal IPv4 address.
EMBEDDED = [
    "http://[2002:7f00:1::1]/",  # 6to4 of 127.0.0.1
    "http://[2002:a00:1::]/",  # 6to4 of 10.0.0.1
    "http://[2002:c0a8:101:1::1]/",  # 6to4 of 192.168.1.1
    "http://[2002:a9fe:a9fe::1]/",  # 6to4 of 169.254.169.254 (cloud metadata)
    "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
    "http://[64:ff9b::10.0.0.1]/",  # NAT64, dotted
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo, client 127.0.0.1
    "http://[2001:0:a00:1::1]/",  # Teredo, server 10.0.0.1
]
RESOLVER = Table(
    six_to_four_test=["2002:a00:1::1"],
    nat64_test=["64:ff9b::a9fe:a9fe"],
    mixed_test=["93.184.215.14", "2002:7f00:1::"],
)
CANARIES = [
    *INTERNAL,
    *EMBEDDED,
    "http://six-to-four.test/",
    "http://nat64.test/",
    "https://mixed.test/",
]


@pytest.mark.parametrize("url", CANARIES)
async def test_every_internal_spelling_is_refused(url: str) -> None:
    with pytest.raises(TargetRefused):
        await UrlGuard(resolve=RESOLVER).check(url)


def test_embedded_ipv4_reads_6to4_nat64_and_teredo() -> None:
    def v4(ip: str) -> list[str]:
        return [str(a) for a in embedded_ipv4(ipaddress.IPv6Address(ip))]

    assert v4("2002:a00:1::1") == ["10.0.0.1"]
    assert v4("64:ff9b::7f00:1") == ["127.0.0.1"]
    assert "127.0.0.1" in v4("2001:0:4136:e378:8000:63bf:80ff:fffe")
    assert v4("2606:2800:21f:cb07::1") == []


async def test_a_public_6to4_address_passes() -> None:
    await UrlGuard().check("http://[2002:5db8:d70e::1]/")  # 6to4 of 93.184.215.14


@pytest.fixture
async def guarded_api(sqlite_store: SqlStore) -> AsyncIterator[httpx2.AsyncClient]:
    guard = UrlGuard(resolve=RESOLVER)
    services = Services(sqlite_store, MemoryBroker(), url_guard=guard.check)
    security = Security.over(services, clock=FakeClock(services.now()))
    secret = (await security.tokens.create("w", Scope.WRITE)).secret
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=create_app(services, security=security)),
        base_url="http://t.test",
        headers={"Authorization": f"Bearer {secret}"},
    ) as client:
        yield client


@pytest.mark.parametrize("url", [*EMBEDDED, "http://six-to-four.test/", "https://mixed.test/"])
async def test_saving_a_job_with_an_internal_url_is_a_422(
    guarded_api: httpx2.AsyncClient, url: str
) -> None:
    body = {"name": "j", "schedule": {"kind": "now"}, "task": {"kind": "http", "url": url}}
    r = await guarded_api.post("/api/v1/jobs", json=body)
    assert (r.status_code, r.json()["error"]["field"]) == (422, "task.url"), r.text
    hook = {"on_failure": {"kind": "http", "url": url}}
    public = {"kind": "http", "url": "http://93.184.215.14/"}
    r = await guarded_api.post("/api/v1/jobs", json={**body, "task": public, "callbacks": hook})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "callbacks.on_failure.url")
    assert (await guarded_api.get("/api/v1/jobs")).json()["jobs"] == []


@pytest.fixture
def local_server() -> Iterator[tuple[str, ServerState]]:
    with serve_http() as served:
        yield served


async def test_a_redirect_is_never_followed(local_server: tuple[str, ServerState]) -> None:
    base, state = local_server
    # The server itself is allowed; where it redirects to is never requested.
    runner = HttpRunner(guard=runner_guard(UrlGuard(parse_allow("127.0.0.0/8"))))
    try:
        task_run = make_task_run(TaskKind.HTTP, {"url": f"{base}/redirect"})
        result = await runner.run(task_run, MemorySink(), asyncio.Event())
    finally:
        await runner.aclose()
    assert not result.ok
    assert state.paths == ["/redirect"]


@pytest.mark.parametrize("host", ["[2002:7f00:1::1]", "[64:ff9b::7f00:1]"])
async def test_the_runner_refuses_embedded_loopback_at_send_time(host: str) -> None:
    runner = HttpRunner(guard=runner_guard(UrlGuard()))
    try:
        task_run = make_task_run(TaskKind.HTTP, {"url": f"http://{host}:9/x"})
        result = await runner.run(task_run, MemorySink(), asyncio.Event())
    finally:
        await runner.aclose()
    assert not result.ok and result.error is not None and "refused" in result.error
