"""Upgrading a database that holds rows, from every revision to head, on SQLite and PostgreSQL.

A fresh database is built at an old revision and filled with jobs, runs, task runs,
attempts and logs through SQL valid for that revision: the rows a store at head writes,
restricted to the tables and columns that exist at that revision. ``SqlStore.migrate`` then
upgrades it, and the rows must come back unchanged with every constraint in place.

The revisions come from Alembic's script directory, so a new one is covered without
touching this file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tests.conftest import run_in_thread
from tests.contract.factory import at, make_job, make_run, outcome, shell_task
from tests.contract.schema_diff import schema_diff
from tests.pg import PostgresServer, create_database, drop_database
from tickwork.core.errors import Conflict
from tickwork.core.model import LogChunk, TaskRunState
from tickwork.store import SqlStore, open_store
from tickwork.store import migrate as migrations
from tickwork.store.columns import on_dialect
from tickwork.store.engine import create_engines
from tickwork.store.schema import metadata

S = TaskRunState
T = TypeVar("T")
REVISIONS = [script.revision for script in migrations.script_directory().walk_revisions()][::-1]
Rows = dict[str, list[dict[str, Any]]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with nothing in it, not even the schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    if server.url is None:
        pytest.skip(f"PostgreSQL unavailable: {server.reason}")
    name = f"tickwork_upgrade_{os.getpid()}_{os.urandom(3).hex()}"
    url = create_database(server.url, name)
    try:
        yield url
    finally:
        drop_database(server.url, name)


@pytest.fixture(scope="module")
def head_rows(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    """Every row of a store at head after a small history: a two-task job whose first task
    failed once, was retried and succeeded (two attempts, logs of both), and a cron job."""
    url = f"sqlite:///{tmp_path_factory.mktemp('head') / 'head.db'}"
    run_in_thread(_history(url))
    return _read(url, _dump)


def _read(url: str, work: Callable[[Connection], T]) -> T:
    engines = create_engines(url)
    try:
        with engines.read.begin() as conn:
            return work(conn)
    finally:
        engines.dispose()


async def _history(url: str) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
        await _steps(store)
    finally:
        await store.close()


async def _steps(store: SqlStore) -> None:
    flow = make_job("flow", tasks=[shell_task("extract"), shell_task("load", ["extract"])])
    cron = make_job("hourly", cron="0 * * * *", next_fire_at=at(3600))
    new_run = make_run(flow, state=S.PENDING)
    first = replace(new_run.task_runs[0], state=S.SCHEDULED)
    await store.create_jobs([(flow, [replace(new_run, task_runs=(first, new_run.task_runs[1]))])])
    await store.create_jobs([(cron, [make_run(cron, at(0))])])
    for attempt, (state, finished) in enumerate([(S.UP_FOR_RETRY, 10), (S.SUCCESS, 30)], 1):
        due = await store.due_task_runs(at(finished), 10)
        keys = [(tr.id, tr.attempt) for tr in due if tr.job_name == "flow"]
        queued = await store.mark_queued(keys, at(finished - 5))
        (claimed,) = await store.claim([(tr.id, tr.attempt) for tr in queued], "w1", at(finished))
        chunk = LogChunk(claimed.id, attempt, attempt, "stdout", f"try {attempt}\n", at(finished))
        await store.append_logs([chunk])
        done = outcome(claimed, state, at(finished + 1), retry_at=at(finished + 2), error="boom")
        await store.complete([replace(done, error=None) if state is S.SUCCESS else done])


def _dump(conn: Connection) -> Rows:
    return {
        table.name: [dict(row) for row in conn.execute(sa.select(table)).mappings()]
        for table in metadata.sorted_tables
        if on_dialect(table, conn.dialect.name)
    }


def _columns_at_revision(conn: Connection) -> dict[str, set[str]]:
    inspector = sa.inspect(conn)
    return {
        table.name: {c["name"] for c in inspector.get_columns(table.name)}
        for table in metadata.sorted_tables
        if inspector.has_table(table.name)
    }


def _restricted(rows: Rows, columns: dict[str, set[str]]) -> Rows:
    return {
        name: [{k: v for k, v in row.items() if k in columns[name]} for row in rows[name]]
        for name in columns
        if name in rows  # run_keys: PostgreSQL only, and the rows come from SQLite
    }


def _insert(conn: Connection, rows: Rows) -> None:
    """Insert ``rows`` (parents first) through tables of exactly these columns, typed as the
    store types them, so no default of a later revision slips in."""
    for table in metadata.sorted_tables:
        if not rows.get(table.name):
            continue
        present = set(rows[table.name][0])
        shape = sa.Table(
            table.name,
            sa.MetaData(),
            *(sa.Column(c.name, c.type) for c in table.c if c.name in present),
        )
        conn.execute(shape.insert(), rows[table.name])


def _key(table: str, row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c.name] for c in metadata.tables[table].primary_key)


@pytest.mark.parametrize("revision", REVISIONS)
async def test_populated_database_upgrades_to_head_with_rows_and_constraints_intact(
    revision: str, empty_url: str, head_rows: Rows
) -> None:
    engines = create_engines(empty_url)  # the store's own engines: foreign keys enforced
    try:
        migrations.upgrade(engines.write, revision)
        with engines.write.begin() as conn:
            columns = _columns_at_revision(conn)
            old_rows = _restricted(head_rows, columns)
            _insert(conn, old_rows)
    finally:
        engines.dispose()
    assert sum(len(r) for r in old_rows.values()) >= 12  # jobs, runs, task runs, attempts, logs

    store = await open_store(empty_url)
    try:
        await store.migrate()
        upgraded = _read(empty_url, _dump)
        for name, rows in old_rows.items():
            kept = {_key(name, r): {k: r[k] for k in columns[name]} for r in upgraded[name]}
            assert kept == {_key(name, r): r for r in rows}, name
        await _assert_readable(store)
        _read(empty_url, _assert_schema)
        orphan = make_run(make_job("never-created"))  # a run of a job that does not exist
        with pytest.raises(Conflict):
            await store.create_runs([orphan])
    finally:
        await store.close()


async def _assert_readable(store: SqlStore) -> None:
    job = await store.get_job("flow")
    assert job is not None
    assert [t.name for t in job.tasks] == ["extract", "load"]
    (run,) = (await store.list_runs(job_id=job.id)).runs
    detail = await store.get_run(run.id)
    assert detail is not None
    assert [a.state for a in detail.attempts] == [S.UP_FOR_RETRY, S.SUCCESS]
    extract = next(tr for tr in detail.task_runs if tr.task_name == "extract")
    assert [c.data for c in await store.read_logs(extract.id)] == ["try 1\n", "try 2\n"]


def _assert_schema(conn: Connection) -> None:
    """Head's tables, columns, indexes and foreign keys, and no row breaking one."""
    assert schema_diff(conn) == []
    assert migrations.current_revision(conn) == migrations.head_revision()
    if conn.dialect.name == "sqlite":
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"


async def test_upgrade_refuses_to_commit_a_dangling_reference(tmp_path: Path) -> None:
    """Foreign keys are not enforced during a SQLite upgrade, so it checks them all before
    committing; a row pointing nowhere (left by an old bug or a hand edit) stops it whole."""
    url = f"sqlite:///{tmp_path / 'dangling.db'}"
    engines = create_engines(url)
    try:
        migrations.upgrade(engines.write, REVISIONS[0])
        with engines.write.connect() as conn:  # in autocommit, where the pragma takes
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.execute("PRAGMA foreign_keys=OFF")
            raw.execute(
                "INSERT INTO task_logs (task_run_id, seq, attempt, stream, data, created_at)"
                " VALUES ('gone', 0, 1, 'stdout', 'x', '2026-01-01 00:00:00.000000')"
            )
            raw.execute("PRAGMA foreign_keys=ON")
        with pytest.raises(migrations.MigrationError, match="task_logs"):
            migrations.upgrade(engines.write)
        with engines.write.begin() as conn:
            assert migrations.current_revision(conn) == REVISIONS[0]
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engines.dispose()
