"""Secret canaries: values planted where secrets live (headers, env, URL userinfo and query,
kwargs, metadata, a stored secret) and then searched for in every API answer, the CLI's
output and the logs. The count must be 0."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import anyio.from_thread
import pytest
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from tests.cli.conftest import Cli, PortalTransport
from tests.fixtures.http_server import ServerState, serve_http
from tests.fixtures.sinks import MemorySink
from tests.fixtures.task_runs import make_task_run
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services, utc_now
from tickwork.broker.memory import MemoryBroker
from tickwork.cli.common import CliDeps
from tickwork.cli.main import app
from tickwork.core.model import CallbackEvent, Outcome, TaskKind, TaskRun, TaskRunState
from tickwork.hooks.context import CallbackContext
from tickwork.observe.logs import CHATTY, TextFormatter
from tickwork.ports import Scope
from tickwork.sdk import Client
from tickwork.security.secrets import SecretCipher
from tickwork.security.ssrf import UrlGuard, parse_allow
from tickwork.serve.wiring import runner_guard
from tickwork.store import open_store
from tickwork.worker.runners import HttpRunner, ShellRunner
from tickwork.worker.secret_runner import SecretRunner

CANARIES = [f"canary{i}x7Q" for i in range(9)]
KEY = Fernet.generate_key()


def _jobs() -> list[dict[str, Any]]:
    c = CANARIES
    http = {
        "kind": "http",
        "name": "call",
        "url": f"https://robot:{c[0]}@example.org/hook?api_key={c[1]}&page=2",
        "headers": {"Authorization": f"Bearer {c[2]}", "X-Api-Key": c[3], "Accept": "x"},
        "body": {"user": "u", "password": c[4]},
    }
    shell = {
        "kind": "shell",
        "name": "dump",
        "argv": ["pg_dump", f"--password={c[5]}"],
        "env": {"DB_PASSWORD": c[6], "SECRET_REF": {"$secret": "vault"}, "HOME": "/h"},
    }
    py = {"kind": "python", "name": "py", "target": "m:f", "kwargs": {"api_token": c[7]}}
    return [
        {
            "name": "leaky",
            "schedule": {"kind": "cron", "cron": "0 3 * * *"},
            "tasks": [http, shell, py],
            "metadata": {"owner": "ops", "session_cookie": c[8]},
        }
    ]


def _leaks(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


@pytest.fixture
def cli(sqlite_url: str) -> Iterator[Cli]:
    """The CLI over an app with a secret key; the admin client plants the canaries."""
    with anyio.from_thread.start_blocking_portal() as portal:
        store = portal.call(open_store, sqlite_url)
        broker = MemoryBroker()
        services = Services(store, broker)
        security = Security.over(services, cipher=SecretCipher(KEY))
        transport = PortalTransport(portal, create_app(services, security=security))
        admin = portal.call(security.tokens.create, "admin", Scope.ADMIN)
        deps = CliDeps(
            make_client=lambda url, token: Client(
                url, token=token or admin.secret, transport=transport
            )
        )
        try:
            yield Cli(deps, portal, store, broker)
        finally:
            portal.call(store.close)


def test_no_canary_reaches_an_api_answer_or_the_cli(cli: Cli) -> None:
    seen: list[str] = []
    client = cli.deps.make_client("http://t.test", None)
    client.set_secret("vault", "vault-value-canary")
    created = client.create_job(_jobs()[0])  # type: ignore[arg-type]
    seen.append(str(created))
    seen.append(str(client.apply_job(_jobs()[0])))  # type: ignore[arg-type]
    run = client.trigger("leaky")
    seen += [str(run), str(client.get_run(run["id"])), str(client.list_runs(job="leaky"))]
    seen += [str(client.get_job("leaky")), str(client.list_jobs()), str(client.list_secrets())]
    seen.append(str(client.dead_letters()))
    for args in (
        ("job", "show", "leaky"),
        ("job", "show", "leaky", "-o", "json"),
        ("job", "list", "-o", "json"),
        ("run", "show", run["id"]),
        ("run", "show", run["id"], "-o", "json"),
        ("secret", "list"),
    ):
        result = cli.ok(*args)
        seen += [result.stdout, result.stderr]
    text = "\n".join(seen)
    assert _leaks(text) == []
    assert "vault-value-canary" not in text
    assert '"$secret": "vault"' in text or "'$secret': 'vault'" in text  # the reference shows
    assert "***" in text


def test_cli_secret_set_reads_stdin_or_a_file(cli: Cli, tmp_path: Any) -> None:
    result = CliRunner().invoke(
        app, ["secret", "set", "db"], input="from-stdin-value\n", obj=cli.deps
    )
    assert result.exit_code == 0, result.stdout
    assert "from-stdin-value" not in result.stdout
    (tmp_path / "v").write_text("from-file-value")
    cli.ok("secret", "set", "db2", "--file", str(tmp_path / "v"))
    listed = cli.ok("secret", "list").stdout
    assert "db" in listed and "db2" in listed and "value" not in listed
    (stored,) = cli.portal.call(cli.store.get_secrets, ["db"]).values()
    assert SecretCipher(KEY).decrypt(stored.ciphertext) == "from-stdin-value"
    cli.ok("secret", "delete", "db")
    assert cli("secret", "delete", "db").exit_code != 0


@pytest.fixture
def local_server() -> Iterator[tuple[str, ServerState]]:
    with serve_http() as served:
        yield served


async def test_no_canary_reaches_the_run_log_or_the_server_log(
    local_server: tuple[str, ServerState], caplog: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    base, _ = local_server
    caplog.set_level(logging.DEBUG)
    for name in CHATTY:  # as configure_logging sets every process up
        logging.getLogger(name).setLevel(logging.WARNING)
    c = CANARIES
    store = await open_store(sqlite_url)
    cipher = SecretCipher(KEY)
    await store.put_secret("vault", cipher.encrypt(c[0]), utc_now())
    http = HttpRunner(guard=runner_guard(UrlGuard(parse_allow("127.0.0.0/8"))))
    runners = {
        TaskKind.HTTP: SecretRunner(http, store, cipher),
        TaskKind.SHELL: SecretRunner(ShellRunner(), store, cipher),
    }
    host = base.split("://", 1)[1]
    http_config = {
        "url": f"http://robot:{c[1]}@{host}/status/500?token={c[2]}",
        "headers": {"Authorization": f"Bearer {c[3]}", "X-Key": {"$secret": "vault"}},
    }
    script = 'echo "$DB_PASSWORD $VAULT"; echo "token=$TOKEN" >&2; exit 3'
    shell_config = {
        "argv": ["sh", "-c", script],
        "env": {"DB_PASSWORD": c[4], "VAULT": {"$secret": "vault"}, "TOKEN": c[5]},
    }
    sink = MemorySink()
    try:
        results = [
            await runners[TaskKind.HTTP].run(
                make_task_run(TaskKind.HTTP, http_config), sink, asyncio.Event()
            ),
            await runners[TaskKind.SHELL].run(
                make_task_run(TaskKind.SHELL, shell_config), sink, asyncio.Event()
            ),
        ]
    finally:
        await http.aclose()
        await store.close()
    assert [r.ok for r in results] == [False, False]
    run_log = "".join(data for _, data in sink.entries)
    errors = " ".join(r.error or "" for r in results)
    logging.getLogger("tickwork.test").info("request to %s failed", http_config["url"])
    callback = CallbackContext.of(
        CallbackEvent.ON_FAILURE,
        make_task_run(TaskKind.SHELL, shell_config),
        _outcome(make_task_run(TaskKind.SHELL, shell_config), f"auth token={c[6]} refused"),
        f"password={c[7]}",
    ).to_json()
    # Each line as every process's log formatter writes it.
    server_log = "\n".join(TextFormatter().format(r) for r in caplog.records)
    everything = "\n".join([run_log, errors, server_log, str(callback)])
    assert "***" in run_log
    assert _leaks(everything) == []


def _outcome(task_run: TaskRun, error: str) -> Outcome:
    return Outcome(task_run.id, 1, TaskRunState.FAILED, utc_now(), error=error)
