"""Serving HTTP inside a process: the API (with the dashboard) on ``host:port`` and the
probes (``/metrics``, ``/livez``, ``/readyz``) on ``metrics_port``. Each server is a loop of
the process; stopping it is among the first stop steps (no new requests while tasks drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import uvicorn
from fastapi import FastAPI

from tickwork.dashboard import end_streams_on_exit
from tickwork.observe.health import Health
from tickwork.observe.http import MetricsEndpoint
from tickwork.serve.http_writes import JoinedWritesProtocol
from tickwork.serve.observed import probe_server
from tickwork.serve.process import Process

log = logging.getLogger("tickwork")


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: signals belong to the process (see
    ``serve/process.py``), whose stop steps shut this server down in their turn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


def probes(process: Process, health: Health, endpoint: MetricsEndpoint) -> None:
    """``/metrics``, ``/livez`` and ``/readyz`` on ``metrics_port`` (0: not served)."""
    s = process.settings
    if not s.metrics_port:
        return
    server = QuietServer(probe_server(s.metrics_host, s.metrics_port, health, endpoint).config)
    serve_http(process, "probes", server)
    where = f"http://{s.metrics_host}:{s.metrics_port}"
    log.info("metrics and probes: %s/metrics, /livez, /readyz", where)


def serve_http(process: Process, name: str, server: uvicorn.Server) -> None:
    """Run ``server`` as a loop of the process; the first stop steps stop it."""
    served = asyncio.Event()

    async def run() -> None:
        try:
            await server.serve()
        finally:
            served.set()

    async def stop_serving() -> None:
        server.should_exit = True
        await served.wait()

    process.loop(name, run())
    process.on_stop(stop_serving, first=True)


def http_api(process: Process, app: FastAPI, what: str = "tickwork") -> None:
    """Serve ``app`` on ``host:port``; the first stop step stops serving (no new requests
    while running tasks drain)."""
    s = process.settings
    config = uvicorn.Config(
        app, host=s.host, port=s.port, log_level="warning", access_log=False, lifespan="off",
        http=JoinedWritesProtocol,  # an answer in one send (see http_writes)
    )  # fmt: skip
    server = QuietServer(config)
    serve_http(process, "api", server)
    # The dashboard's live streams never end by themselves; the server waits for them.
    process.loop("dashboard-streams", end_streams_on_exit(app, lambda: server.should_exit))
    log.info("%s is up: http://%s:%d (dashboard: http://%s:%d/)", what, *(s.host, s.port) * 2)
