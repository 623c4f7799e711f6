"""Secrets: stored encrypted, referenced as ``{"$secret": NAME}``, resolved only on the worker,
never answered; the data dir and database are private; ``admin.token`` is never replaced."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import httpx2
import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI

from tests.fixtures.sinks import MemorySink
from tests.fixtures.task_runs import make_task_run
from tests.helpers import FakeClock
from tests.security.conftest import Clients
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services, utc_now
from tickwork.app.tokens import TokenService
from tickwork.broker.memory import MemoryBroker
from tickwork.core.model import TaskKind, TaskRun
from tickwork.ports import LogSink, RunResult, Scope
from tickwork.security.files import private_dir, private_sqlite
from tickwork.security.secrets import KEY_ENV, SecretCipher, cipher_from
from tickwork.store import SqlStore, open_store
from tickwork.worker.secret_runner import SecretRunner

API = "/api/v1"
KEY = Fernet.generate_key()


@pytest.fixture
def app(services: Services, clock: FakeClock) -> FastAPI:
    """The suite's app, with a secret key."""
    security = Security.over(services, clock=clock, cipher=SecretCipher(KEY))
    return create_app(services, security=security)


async def test_a_secret_is_set_listed_and_deleted_never_shown(
    as_scope: Clients, sqlite_store: SqlStore
) -> None:
    admin = as_scope(Scope.ADMIN)
    r = await admin.put(f"{API}/secrets/db-pass", json={"value": "s3cret-value"})
    assert r.status_code == 201 and set(r.json()) == {"name", "created_at", "updated_at"}
    r = await admin.put(f"{API}/secrets/db-pass", json={"value": "other-value"})
    assert r.status_code == 200
    listed = (await admin.get(f"{API}/secrets")).json()["secrets"]
    assert [s["name"] for s in listed] == ["db-pass"]
    assert "value" not in str(listed)
    # At rest: only the ciphertext, which the key opens.
    (stored,) = (await sqlite_store.get_secrets(["db-pass"])).values()
    assert "other-value" not in stored.ciphertext
    assert SecretCipher(KEY).decrypt(stored.ciphertext) == "other-value"
    for scope in (Scope.READ, Scope.WRITE):
        assert (await as_scope(scope).get(f"{API}/secrets")).status_code == 403
    assert (await admin.put(f"{API}/secrets/bad name", json={"value": "x"})).status_code == 422
    assert (await admin.delete(f"{API}/secrets/db-pass")).status_code == 204
    assert (await admin.delete(f"{API}/secrets/db-pass")).status_code == 404


async def test_without_a_key_setting_a_secret_is_a_503(sqlite_store: SqlStore) -> None:
    services = Services(sqlite_store, MemoryBroker())
    security = Security.over(services)
    secret = (await security.tokens.create("a", Scope.ADMIN)).secret
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=create_app(services, security=security)),
        base_url="http://t.test",
        headers={"Authorization": f"Bearer {secret}"},
    ) as client:
        r = await client.put(f"{API}/secrets/x", json={"value": "v"})
    assert r.status_code == 503 and KEY_ENV in r.text


async def test_jobs_refer_to_existing_secrets_and_show_only_the_reference(
    as_scope: Clients,
) -> None:
    admin = as_scope(Scope.ADMIN)
    ref = {"$secret": "api-token"}
    task = {"kind": "http", "url": "https://example.org/x", "headers": {"Authorization": ref}}
    job = {"name": "j", "schedule": {"kind": "cron", "cron": "0 3 * * *"}, "task": task}
    r = await admin.post(f"{API}/jobs", json=job)
    assert (r.status_code, r.json()["error"]["field"]) == (422, "task"), r.text
    assert "api-token" in r.json()["error"]["message"]
    await admin.put(f"{API}/secrets/api-token", json={"value": "tok-123456"})
    r = await admin.post(f"{API}/jobs", json=job)
    assert r.status_code == 201, r.text
    assert r.json()["tasks"][0]["config"]["headers"] == {"Authorization": ref}
    assert "tok-123456" not in (await admin.get(f"{API}/jobs/j")).text


class Recorder:
    """A runner that records the task run it is given and prints its config's env."""

    def __init__(self) -> None:
        self.seen: list[TaskRun] = []

    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        self.seen.append(task_run)
        log.write("stdout", f"env={dict(task_run.config.get('env', {}))}\n")
        return RunResult(ok=True)


async def test_the_worker_resolves_references_and_masks_them_in_output(
    sqlite_store: SqlStore,
) -> None:
    cipher = SecretCipher(KEY)
    await sqlite_store.put_secret("pw", cipher.encrypt("hunter2-hunter2"), utc_now())
    inner = Recorder()
    config = {"argv": ["true"], "env": {"PW": {"$secret": "pw"}, "DB_PASSWORD": "plain-pw-1"}}
    sink = MemorySink()
    result = await SecretRunner(inner, sqlite_store, cipher).run(
        make_task_run(TaskKind.SHELL, config), sink, asyncio.Event()
    )
    assert result.ok
    assert inner.seen[0].config["env"] == {"PW": "hunter2-hunter2", "DB_PASSWORD": "plain-pw-1"}
    output = "".join(data for _, data in sink.entries)
    assert "hunter2" not in output and "plain-pw-1" not in output and "***" in output
    missing = make_task_run(TaskKind.SHELL, {"argv": ["true"], "env": {"X": {"$secret": "gone"}}})
    result = await SecretRunner(inner, sqlite_store, cipher).run(missing, sink, asyncio.Event())
    assert not result.ok and "'gone'" in (result.error or "")
    result = await SecretRunner(inner, sqlite_store, None).run(
        make_task_run(TaskKind.SHELL, config), sink, asyncio.Event()
    )
    assert not result.ok and KEY_ENV in (result.error or "")
    assert len(inner.seen) == 1  # nothing ran without its secrets


async def test_one_runner_over_attempts_sharing_a_config_resolves_and_masks_each(
    sqlite_store: SqlStore,
) -> None:
    # The task runs of one claim share their config object; the runner keeps what it found
    # in a config with no reference, never a resolved secret (a changed one is seen).
    cipher = SecretCipher(KEY)
    inner = Recorder()
    runner = SecretRunner(inner, sqlite_store, cipher)
    plain = {"argv": ["true"], "env": {"API_TOKEN": "plain-token-1", "N": "1"}}
    for _ in range(2):
        sink = MemorySink()
        assert (await runner.run(make_task_run(TaskKind.SHELL, plain), sink, asyncio.Event())).ok
        output = "".join(data for _, data in sink.entries)
        assert "plain-token-1" not in output and "'N': '1'" in output
    referring = {"argv": ["true"], "env": {"PW": {"$secret": "pw"}}}
    for value in ("first-secret-1", "second-secret-2"):
        await sqlite_store.put_secret("pw", cipher.encrypt(value), utc_now())
        sink = MemorySink()
        task_run = make_task_run(TaskKind.SHELL, referring)
        assert (await runner.run(task_run, sink, asyncio.Event())).ok
        assert inner.seen[-1].config["env"] == {"PW": value}
        assert value not in "".join(data for _, data in sink.entries)
    await runner.run(make_task_run(TaskKind.SHELL, plain), MemorySink(), asyncio.Event())
    assert inner.seen[-1].config is plain


def test_the_key_comes_from_the_environment_or_a_private_key_file(tmp_path: Path) -> None:
    env_key = Fernet.generate_key().decode()
    from_env = cipher_from({KEY_ENV: env_key}, tmp_path)
    assert from_env is not None and not (tmp_path / "secret.key").exists()
    made = cipher_from({}, tmp_path)
    assert made is not None
    assert stat.S_IMODE((tmp_path / "secret.key").stat().st_mode) == 0o600
    again = cipher_from({}, tmp_path)
    assert again is not None and again.decrypt(made.encrypt("v")) == "v"
    assert cipher_from({}, None) is None


async def test_the_data_dir_and_database_files_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    private_dir(data)
    url = f"sqlite:///{data / 'tickwork.db'}"
    private_sqlite(url)
    store = await open_store(url)
    try:
        await store.migrate()
        await store.put_secret("x", "ciphertext", utc_now())
    finally:
        await store.close()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    files = [p for p in data.iterdir() if p.name.startswith("tickwork.db")]
    assert files and {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}, files


async def test_bootstrap_never_replaces_an_existing_admin_token(
    sqlite_store: SqlStore, tmp_path: Path
) -> None:
    (tmp_path / "admin.token").write_text("tw_other_database\n")
    path = await TokenService(sqlite_store, utc_now).bootstrap(tmp_path)
    assert (tmp_path / "admin.token").read_text() == "tw_other_database\n"
    assert path is not None and path != tmp_path / "admin.token"
    assert path.read_text().startswith("tw_")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_umask_independent(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        private_dir(tmp_path / "d")
        private_sqlite(f"sqlite:///{tmp_path / 'd' / 'x.db'}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "d" / "x.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700
