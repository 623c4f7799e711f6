"""`tickwork api --role read`: the read routers alone, over a database that may be a replica.

The write side is not served standalone yet: creating or triggering a job publishes to the
broker, and the broker of an embedded deployment lives inside `tickwork up`'s process. Until a
broker can be shared between processes, `--role write|all` is refused (``refusal``).
"""

from __future__ import annotations

import asyncio
import logging

import uvicorn
from fastapi import FastAPI

from tickwork.api.app import Role, create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.dashboard import end_streams_on_exit, with_dashboard
from tickwork.observe.logs import configure_logging
from tickwork.ports import Store
from tickwork.store import open_store

log = logging.getLogger("tickwork")


def refusal(role: Role) -> str | None:
    """Why ``role`` cannot be served standalone, or None when it can."""
    if role == "read":
        return None
    return (
        f"--role {role} needs the scheduler's broker, which runs inside `tickwork up` for now; "
        "use `tickwork up` for the write side and `tickwork api --role read` for a read-only API"
    )


def read_app(store: Store) -> FastAPI:
    """The read routers over ``store``, and the dashboard without its actions. The API never
    writes: tokens are not touched on use, so the store may be a read replica (a dashboard
    sign-in writes its session, so it needs the primary). The broker is a placeholder no
    read route uses."""
    services = Services(store, MemoryBroker())
    security = Security(TokenService(store, utc_now, touch=False), store)
    app = create_app(services, security=security, role="read")
    return with_dashboard(app, services, writable=False)


async def serve_read_api(database_url: str, host: str, port: int) -> None:
    """Serve the read API until SIGINT/SIGTERM. The schema is not migrated: a replica
    follows its primary, which `tickwork up` migrates."""
    store = await open_store(database_url)
    try:
        app = read_app(store)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        log.info(
            "tickwork read API is up: http://%s:%d (dashboard: http://%s:%d/)",
            host,
            port,
            host,
            port,
        )
        server = uvicorn.Server(config)
        streams = asyncio.create_task(end_streams_on_exit(app, lambda: server.should_exit))
        try:
            await server.serve()
        finally:
            streams.cancel()
    finally:
        await store.close()


def run_read_api(database_url: str, host: str, port: int, log_format: str = "text") -> None:
    """Blocking entry point of `tickwork api --role read`."""
    configure_logging(log_format)
    asyncio.run(serve_read_api(database_url, host, port))
