"""The CLI through Typer's runner, its SDK client wired to the ASGI app in this process.

The app, its store and its broker live on an event loop in a portal thread; ``PortalTransport``
(a real httpx2 transport, not a mock) hands each request of the sync client to that loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.from_thread
import httpx2
import pytest
from typer.testing import CliRunner, Result

from tickwork.api.app import create_app
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.cli.common import CliDeps
from tickwork.cli.main import app
from tickwork.ports import Scope
from tickwork.sdk import Client
from tickwork.store import SqlStore, open_store


class PortalTransport(httpx2.BaseTransport):
    """Sends each request to an ASGI app running on a portal's event loop."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, asgi_app: Any) -> None:
        self._portal = portal
        self._asgi = httpx2.ASGITransport(app=asgi_app)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self._portal.call(self._send, request)

    async def _send(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._asgi.handle_async_request(request)
        body = await response.aread()
        return httpx2.Response(response.status_code, headers=response.headers, content=body)


@dataclass
class Cli:
    """Runs ``tickwork`` commands against the in-process server."""

    deps: CliDeps
    portal: anyio.from_thread.BlockingPortal
    store: SqlStore
    broker: MemoryBroker

    def __call__(self, *args: str) -> Result:
        # A terminal of a fixed width: otherwise the width depends on how pytest was started
        # (a pytest-xdist worker has no terminal, and tables wrapped differently).
        return CliRunner().invoke(app, list(args), obj=self.deps, env={"COLUMNS": "120"})

    def ok(self, *args: str) -> Result:
        """Run a command that must succeed."""
        result = self(*args)
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        return result


@pytest.fixture
def cli(sqlite_url: str) -> Iterator[Cli]:
    with anyio.from_thread.start_blocking_portal() as portal:
        store = portal.call(open_store, sqlite_url)
        broker = MemoryBroker()
        transport = PortalTransport(portal, create_app(Services(store, broker)))
        admin = portal.call(TokenService(store, utc_now).create, "cli-admin", Scope.ADMIN)
        deps = CliDeps(
            make_client=lambda url, token: Client(
                url, token=token or admin.secret, transport=transport
            )
        )
        try:
            yield Cli(deps, portal, store, broker)
        finally:
            portal.call(store.close)


def error_line(result: Result) -> str:
    """The one ``error: ...`` line a failed command printed, checking there is only that."""
    assert result.exit_code != 0
    lines: Sequence[str] = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in result.output
    return lines[0]
