"""`tickwork api --role read`: the read routers alone, over a database that may be a replica.

The write side is not served standalone over SQLite: creating or triggering a job publishes to
the broker, and the broker of an embedded deployment lives inside `tickwork up`'s process.
Until a broker can be shared between processes, `--role write|all` is refused there
(``refusal``). The process itself is built by ``wiring.build_read_api``.
"""

from __future__ import annotations

from fastapi import FastAPI

from tickwork.api.app import Role, create_app
from tickwork.api.auth import Security
from tickwork.app.secrets import SecretService
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.dashboard import with_dashboard
from tickwork.ports import Store


def refusal(role: Role) -> str | None:
    """Why ``role`` cannot be served standalone beside `tickwork up`, or None when it can."""
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
    tokens = TokenService(store, utc_now, touch=False)
    security = Security(tokens, store, SecretService(store, None, utc_now))
    app = create_app(services, security=security, role="read")
    return with_dashboard(app, services, writable=False)
