"""The SSRF guard: every spelling of an internal address is refused unless allowed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.fixtures.http_server import ServerState, serve_http
from tests.fixtures.sinks import MemorySink
from tests.fixtures.task_runs import make_task_run
from tickwork.core.model import TaskKind
from tickwork.security.ssrf import TargetRefused, UrlGuard, literal_address, parse_allow
from tickwork.serve.wiring import runner_guard
from tickwork.worker.runners import HttpRunner


class Table:
    """A resolver over a fixed table: the real lookup, minus the network."""

    def __init__(self, **names: list[str]) -> None:
        self.names = {k.replace("_", "."): v for k, v in names.items()}
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.names:
            raise OSError(f"{host}: no such name")
        return self.names[host]


TABLE = Table(
    example_org=["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    rebind_test=["93.184.215.14", "10.1.2.3"],
    inside_corp=["10.20.30.40"],
)

INTERNAL = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://017700000001/",
    "http://[::1]/",
    "http://[::]/",
    "http://0.0.0.0/",
    "http://0/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:10.0.0.1]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1:8080/admin",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://100.64.0.1/",
    "https://inside.corp/",
    "https://rebind.test/",
]


@pytest.mark.parametrize("url", INTERNAL)
async def test_internal_targets_are_refused(url: str) -> None:
    with pytest.raises(TargetRefused, match="refused: "):
        await UrlGuard(resolve=TABLE).check(url)


@pytest.mark.parametrize(
    "url", ["https://example.org/health", "http://93.184.215.14/", "http://[2606:4700::1111]/"]
)
async def test_public_targets_pass(url: str) -> None:
    await UrlGuard(resolve=TABLE).check(url)


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(TargetRefused, match="does not resolve"):
        await UrlGuard(resolve=TABLE).check("https://nowhere.invalid/")


async def test_localhost_resolves_to_loopback_through_the_system_resolver() -> None:
    with pytest.raises(TargetRefused, match=r"localhost \((127\.0\.0\.1|::1)\) is loopback"):
        await UrlGuard().check("http://localhost:8080/healthz")


async def test_allowed_networks_open_exactly_those_networks() -> None:
    guard = UrlGuard(parse_allow("127.0.0.0/8, 10.0.0.0/8"), resolve=TABLE)
    await guard.check("http://127.0.0.1:8080/")
    await guard.check("http://[::ffff:127.0.0.1]/")
    await guard.check("https://inside.corp/")
    with pytest.raises(TargetRefused, match="loopback"):
        await guard.check("http://[::1]/")
    with pytest.raises(TargetRefused, match="private"):
        await guard.check("http://192.168.0.1/")


async def test_literal_hosts_skip_the_resolver() -> None:
    table = Table()
    await UrlGuard(resolve=table).check("http://8.8.8.8/")
    assert table.asked == []


def test_literals_are_read_like_the_c_library() -> None:
    assert str(literal_address("0177.0.0.1")) == "127.0.0.1"
    assert str(literal_address("127.1")) == "127.0.0.1"
    assert str(literal_address("[::1]")) == "::1"
    assert literal_address("example.org") is None


def test_bad_allow_entries_are_named() -> None:
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33' is not a network"):
        parse_allow("127.0.0.0/8,10.0.0.0/33")
    assert parse_allow(" , ") == ()


@pytest.fixture
def local_server() -> Iterator[tuple[str, ServerState]]:
    with serve_http() as served:
        yield served


async def test_runner_refuses_at_send_time_and_sends_nothing(
    local_server: tuple[str, ServerState],
) -> None:
    base, state = local_server
    runner = HttpRunner(guard=runner_guard(UrlGuard()))
    try:
        task_run = make_task_run(TaskKind.HTTP, {"url": f"{base}/status/200"})
        result = await runner.run(task_run, MemorySink(), asyncio.Event())
    finally:
        await runner.aclose()
    assert not result.ok
    assert result.error is not None and "loopback" in result.error
    assert state.paths == []


async def test_runner_sends_to_allowed_networks(local_server: tuple[str, ServerState]) -> None:
    base, state = local_server
    runner = HttpRunner(guard=runner_guard(UrlGuard(parse_allow("127.0.0.0/8"))))
    try:
        task_run = make_task_run(TaskKind.HTTP, {"url": f"{base}/status/200"})
        result = await runner.run(task_run, MemorySink(), asyncio.Event())
    finally:
        await runner.aclose()
    assert result.ok
    assert state.paths == ["/status/200"]
