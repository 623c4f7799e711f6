"""``{"$secret": NAME}`` as a URL's userinfo (``url_auth``) and in callback headers: saved as
references, resolved only where the request is sent (the worker's http runner, the process
that fires the callback), and masked in what is logged or reported."""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
from dataclasses import replace

import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI

from tests.fixtures.http_server import serve_http
from tests.fixtures.sinks import MemorySink
from tests.fixtures.task_runs import make_task_run
from tests.helpers import FakeClock, eventually
from tests.security.conftest import Clients
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services, utc_now
from tickwork.core.model import Callback, CallbackEvent, Outcome, TaskKind, TaskRunState
from tickwork.hooks import Hooks
from tickwork.ports import Scope
from tickwork.security.secrets import SecretCipher, resolve_secrets
from tickwork.security.ssrf import UrlGuard, parse_allow
from tickwork.store import SqlStore
from tickwork.worker.runners.http import HttpRunner
from tickwork.worker.secret_runner import SecretRunner

API = "/api/v1"
KEY = Fernet.generate_key()
AUTH = {"$secret": "svc-login"}
TOKEN = {"$secret": "hook-token"}
LOGIN, TOKEN_VALUE = "svc-user:pa55-w0rd-xyz", "hook-tok-98765"


@pytest.fixture
def app(services: Services, clock: FakeClock) -> FastAPI:
    """The suite's app, with a secret key."""
    security = Security.over(services, clock=clock, cipher=SecretCipher(KEY))
    return create_app(services, security=security)


def _job(task: dict[str, object], **extra: object) -> dict[str, object]:
    return {"name": "j", "schedule": {"kind": "cron", "cron": "0 3 * * *"}, "task": task, **extra}


async def test_url_auth_and_callback_headers_take_references_and_show_only_them(
    as_scope: Clients,
) -> None:
    admin = as_scope(Scope.ADMIN)
    hook = {"kind": "http", "url": "https://hooks.example.org/x", "url_auth": AUTH}
    hook["headers"] = {"X-Token": TOKEN}
    job = _job(
        {"kind": "http", "url": "https://example.org/x", "url_auth": AUTH},
        callbacks={"on_failure": hook},
    )
    await admin.put(f"{API}/secrets/svc-login", json={"value": LOGIN})
    r = await admin.post(f"{API}/jobs", json=job)
    assert (r.status_code, r.json()["error"]["field"]) == (422, "callbacks.on_failure"), r.text
    assert "hook-token" in r.json()["error"]["message"]

    await admin.put(f"{API}/secrets/hook-token", json={"value": TOKEN_VALUE})
    r = await admin.post(f"{API}/jobs", json=job)

    assert r.status_code == 201, r.text
    assert r.json()["tasks"][0]["config"]["url_auth"] == AUTH
    shown = (await admin.get(f"{API}/jobs/j")).json()
    assert shown["callbacks"]["on_failure"]["headers"] == {"X-Token": TOKEN}
    assert LOGIN not in str(shown) and TOKEN_VALUE not in str(shown)


@pytest.mark.parametrize(
    ("task", "field"),
    [
        ({"url_auth": "user:literal-pw"}, "url_auth"),  # never a literal
        ({"url": "https://u:p@example.org/x", "url_auth": AUTH}, "url"),  # one or the other
    ],
)
async def test_url_auth_refuses_a_literal_or_a_second_userinfo(
    as_scope: Clients, task: dict[str, object], field: str
) -> None:
    admin = as_scope(Scope.ADMIN)
    await admin.put(f"{API}/secrets/svc-login", json={"value": LOGIN})
    body = _job({"kind": "http", "url": "https://example.org/x", **task})
    r = await admin.post(f"{API}/jobs", json=body)
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]["field"] and "literal-pw" not in r.text
    assert (await admin.get(f"{API}/jobs/j")).status_code == 404


async def test_the_http_runner_sends_url_auth_as_basic_auth_and_masks_it(
    sqlite_store: SqlStore,
) -> None:
    cipher = SecretCipher(KEY)
    await sqlite_store.put_secret("svc-login", cipher.encrypt(LOGIN), utc_now())
    with serve_http() as (base, state):
        config = {"method": "GET", "url": f"{base}/echo", "url_auth": AUTH}
        sink = MemorySink()
        http = HttpRunner()
        runner = SecretRunner(http, sqlite_store, cipher)
        try:
            result = await runner.run(make_task_run(TaskKind.HTTP, config), sink, asyncio.Event())
        finally:
            await http.aclose()
    assert result.ok, result.error
    (request,) = state.requests
    assert request.headers["Authorization"] == f"Basic {base64.b64encode(LOGIN.encode()).decode()}"
    output = "".join(data for _, data in sink.entries)
    assert "pa55-w0rd-xyz" not in output  # the echoed Authorization header is masked


async def test_a_callback_resolves_its_secrets_where_it_is_sent(
    sqlite_store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    cipher = SecretCipher(KEY)
    await sqlite_store.put_secret("svc-login", cipher.encrypt(LOGIN), utc_now())
    await sqlite_store.put_secret("hook-token", cipher.encrypt(TOKEN_VALUE), utc_now())
    errors: list[str] = []
    hooks = Hooks(
        url_guard=UrlGuard(parse_allow("127.0.0.0/8")).check,
        on_error=lambda _id, _attempt, message: errors.append(message),
        secrets=functools.partial(resolve_secrets, sqlite_store, cipher),
    )
    with serve_http() as (base, state):
        for path in ("/echo", "/status/500"):
            hook = Callback(
                TaskKind.HTTP, {"url": base + path, "url_auth": AUTH, "headers": {"X-T": TOKEN}}
            )
            task_run = replace(
                make_task_run(TaskKind.SHELL, {"argv": ["true"]}),
                callbacks={CallbackEvent.ON_FAILURE: hook},
            )
            outcome = Outcome("tr-1", 1, TaskRunState.FAILED, utc_now(), error="exit code 1")
            with caplog.at_level(logging.WARNING, "tickwork.hooks"):
                hooks.fire(task_run, outcome)
                await eventually(lambda: asyncio.sleep(0, hooks.pending), lambda n: n == 0)
        await hooks.close(1.0)
    sent = state.requests[0].headers
    assert sent["X-T"] == TOKEN_VALUE
    assert sent["Authorization"] == f"Basic {base64.b64encode(LOGIN.encode()).decode()}"
    assert len(errors) == 1 and "500" in errors[0]
    told = errors[0] + caplog.text
    assert TOKEN_VALUE not in told and "pa55-w0rd-xyz" not in told
