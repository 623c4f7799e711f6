"""Shared fixtures: SQL stores on SQLite and PostgreSQL.

- ``store``: a migrated, empty ``SqlStore``, parametrized over ``sqlite`` (a file in
  ``tmp_path``) and ``postgres`` (marked ``postgres``).
- ``sqlite_store``: the SQLite one only. ``pg_store``: the PostgreSQL one only.
- ``sqlite_url``: the URL of a migrated SQLite file for this test.
- ``pg_url``: a migrated PostgreSQL database for this session (tests on it are isolated by
  ``store.truncate_all()``, which ``store``/``pg_store`` do before each test).
- ``redis_url``: the shared Redis (or, if none answers, one started for the session);
  tests on it use a key prefix of their own (``redis_prefix``) and never flush it.
- ``private_redis``: a Redis server of this test alone, to stop, restart and flush.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import urllib.parse
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.coord_servers import PrivateEtcd, PrivateZooKeeper
from tests.pg import PostgresServer, create_database, drop_database, provide_postgres
from tests.redis_server import PrivateRedis, answers, shared_url
from tickwork.store import SqlStore, open_store

_postgres_unavailable: list[str] = []


def run_in_thread(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to the end on its own loop (safe where a loop may already be running)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


async def _migrate(url: str) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
    finally:
        await store.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = provide_postgres()
    if server.url is None:
        _postgres_unavailable.append(server.reason)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    if postgres_server.url is None:
        pytest.skip(f"PostgreSQL unavailable: {postgres_server.reason}")
    name = f"tickwork_test_{os.getpid()}_{os.urandom(3).hex()}"
    url = create_database(postgres_server.url, name)
    try:
        run_in_thread(_migrate(url))
        yield url
    finally:
        drop_database(postgres_server.url, name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test (faster than migrating each time)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    run_in_thread(_migrate(f"sqlite:///{path}"))
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    path = tmp_path / "tickwork.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def postgres_url(pg_url: str) -> str:
    return pg_url


async def _fresh_store(url: str) -> SqlStore:
    store = await open_store(url)
    if store.dialect == "postgresql":
        await store.truncate_all()
    return store


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[SqlStore]:
    opened = await _fresh_store(store_url)
    yield opened
    await opened.close()


@pytest.fixture
async def sqlite_store(sqlite_url: str) -> AsyncIterator[SqlStore]:
    opened = await _fresh_store(sqlite_url)
    yield opened
    await opened.close()


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[SqlStore]:
    opened = await _fresh_store(pg_url)
    yield opened
    await opened.close()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = shared_url()
    if answers(urllib.parse.urlsplit(url).port or 6379):
        yield url
        return
    server = PrivateRedis()  # nothing answers: a server of our own for the session
    server.start()
    try:
        yield server.url
    finally:
        server.close()


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test alone; its keys are deleted afterwards."""
    prefix = f"tickwork-test-{os.urandom(4).hex()}"
    yield prefix
    run_in_thread(_delete_keys(redis_url, f"{{{prefix}}}:*"))


async def _delete_keys(url: str, pattern: str) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=pattern, count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    yield server
    server.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for reason in _postgres_unavailable:
        terminalreporter.write_sep("!", f"PostgreSQL tests SKIPPED: {reason}", red=True, bold=True)


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[PrivateEtcd]:
    """An etcd of this test session (private, on free ports); tests use a key prefix each."""
    server = PrivateEtcd()
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[PrivateZooKeeper]:
    """A ZooKeeper of this test session (private, on free ports); tests use a root each."""
    server = PrivateZooKeeper()
    server.start()
    yield server
    server.close()
