"""Transactional enqueue on real PostgreSQL: the run exists exactly when the caller commits,
and a committed run is run once by a real scheduler and worker pool."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from tests.helpers import eventually, make_job, python_task, running_engine
from tests.pg import libpq_url
from tickwork import outbox
from tickwork.core.errors import NotFound, ValidationError
from tickwork.core.model import Job, RunDetail, RunState
from tickwork.core.params import ParamsContract
from tickwork.ports import Store
from tickwork.serve.embedded import Embedded
from tickwork.store.sql import SqlStore, open_store

pytestmark = pytest.mark.postgres
TASKS = "tests.integration.engine_tasks"


@pytest.fixture
async def engine(pg_store: SqlStore) -> AsyncIterator[Embedded]:
    async with running_engine(pg_store, concurrency=4) as rt:
        yield rt


@pytest.fixture
async def job(pg_store: SqlStore) -> Job:
    j = make_job("greet", now=datetime.now(UTC), task=python_task(f"{TASKS}:hello"))
    j = replace(j, params=ParamsContract({"name": {"type": "string"}}, ("name",)))
    await pg_store.create_jobs([(j, [])])
    return j


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection]:
    # autocommit: each ``with conn.transaction()`` is then a transaction of its own, not a
    # savepoint in one a bare ``execute`` opened.
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS app_orders (id text PRIMARY KEY)")
        c.execute("TRUNCATE app_orders")
        yield c


async def run_ids(store: Store) -> list[str]:
    page = await store.list_runs(limit=100)
    return [r.id for r in page.runs]


async def finished(store: Store, run_id: str) -> RunDetail:
    d = await eventually(
        lambda: store.get_run(run_id),
        lambda d: d is not None and d.run.state is RunState.SUCCESS,
    )
    assert d is not None
    return d


async def test_commit_runs_once_and_rollback_never(
    engine: Embedded, job: Job, conn: psycopg.Connection
) -> None:
    with conn.transaction(force_rollback=True):
        outbox.enqueue(conn, "greet", {"name": "rolled back"})
    with conn.transaction():
        run_id = outbox.enqueue(conn, "greet", {"name": "committed"})

    d = await finished(engine.store, run_id)
    assert [a.attempt for a in d.attempts] == [1]
    assert d.task_runs[0].config["kwargs"] == {"name": "committed"}
    assert await run_ids(engine.store) == [run_id]  # the rolled-back one never appeared


async def test_savepoint_rolled_back_and_app_row_commit_together(
    job: Job, pg_store: SqlStore, conn: psycopg.Connection
) -> None:
    with conn.transaction():
        kept = outbox.enqueue(conn, "greet", {"name": "a"})
        with pytest.raises(ZeroDivisionError), conn.transaction():  # a savepoint
            outbox.enqueue(conn, "greet", {"name": "b"})
            raise ZeroDivisionError
    assert await run_ids(pg_store) == [kept]

    # The application's own row and the run: both or neither.
    with pytest.raises(ZeroDivisionError), conn.transaction():
        conn.execute("INSERT INTO app_orders VALUES ('o1')")
        outbox.enqueue(conn, "greet", {"name": "o1"})
        raise ZeroDivisionError
    assert conn.execute("SELECT count(*) FROM app_orders").fetchone() == (0,)
    assert await run_ids(pg_store) == [kept]
    with conn.transaction():
        conn.execute("INSERT INTO app_orders VALUES ('o2')")
        second = outbox.enqueue(conn, "greet", {"name": "o2"})
    assert conn.execute("SELECT count(*) FROM app_orders").fetchone() == (1,)
    assert sorted(await run_ids(pg_store)) == sorted([kept, second])


async def test_idempotency_key_enqueues_once_across_retries(
    job: Job, pg_store: SqlStore, conn: psycopg.Connection
) -> None:
    with conn.transaction(force_rollback=True):  # the first try fails: the key goes with it
        outbox.enqueue(conn, "greet", {"name": "x"}, idempotency_key="order-7")
    with conn.transaction():
        first = outbox.enqueue(conn, "greet", {"name": "x"}, idempotency_key="order-7")
    with conn.transaction():  # a retry after an unseen commit
        again = outbox.enqueue(conn, "greet", {"name": "x"}, idempotency_key="order-7")
    assert again == first
    assert await run_ids(pg_store) == [first]


async def test_unknown_job_and_params_against_the_contract_refused(
    job: Job, pg_store: SqlStore, conn: psycopg.Connection
) -> None:
    with pytest.raises(NotFound), conn.transaction():
        outbox.enqueue(conn, "nope")
    with pytest.raises(ValidationError, match=r"params\.name"), conn.transaction():
        outbox.enqueue(conn, "greet", {"name": 7})
    with pytest.raises(ValidationError, match=r"params\.extra"), conn.transaction():
        outbox.enqueue(conn, "greet", {"name": "x", "extra": 1})
    assert await run_ids(pg_store) == []


async def test_async_psycopg_and_sqlalchemy_session(
    engine: Embedded, job: Job, pg_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(libpq_url(pg_url), autocommit=True) as aconn:
        async with aconn.transaction(force_rollback=True):
            await outbox.enqueue_async(aconn, "greet", {"name": "never"})
        async with aconn.transaction():
            ids = await outbox.enqueue_many_async(
                aconn, [outbox.Item("greet", {"name": "a1"}), outbox.Item("greet", {"name": "a2"})]
            )

    sa_engine = sa.create_engine(pg_url)
    try:
        with Session(sa_engine) as session:
            outbox.enqueue(session, "greet", {"name": "dropped"})
            session.rollback()
            ids.append(outbox.enqueue(session, "greet", {"name": "s1"}))
            session.commit()
    finally:
        sa_engine.dispose()

    names = [(await finished(engine.store, i)).task_runs[0].config["kwargs"]["name"] for i in ids]
    assert names == ["a1", "a2", "s1"]
    assert sorted(await run_ids(engine.store)) == sorted(ids)


async def test_cached_job_read_again_when_changed_or_deleted(
    job: Job, pg_store: SqlStore, conn: psycopg.Connection
) -> None:
    with conn.transaction():
        first = outbox.enqueue(conn, "greet", {"name": "a"})  # the job is remembered from here
    contract = ParamsContract({"who": {"type": "string"}}, ("who",))
    changed = replace(job, params=contract, updated_at=datetime.now(UTC))
    assert await pg_store.update_job(changed, job.updated_at, reschedule=False)

    with conn.transaction():  # refused by the remembered contract: read again, accepted
        second = outbox.enqueue(conn, "greet", {"who": "c"})
    back = replace(job, updated_at=datetime.now(UTC))  # the first contract again
    assert await pg_store.update_job(back, changed.updated_at, reschedule=False)
    with pytest.raises(ValidationError, match=r"params\.who"), conn.transaction():
        outbox.enqueue(conn, "greet", {"who": "b"})  # accepted by the remembered one: not used
    await pg_store.delete_job(job.id, datetime.now(UTC))
    with pytest.raises(NotFound), conn.transaction():
        outbox.enqueue(conn, "greet", {"who": "d"})
    assert sorted(await run_ids(pg_store)) == sorted([first, second])


async def test_tables_in_a_configured_schema(pg_url: str, conn: psycopg.Connection) -> None:
    conn.execute("DROP SCHEMA IF EXISTS tw_outbox CASCADE")
    conn.execute("CREATE SCHEMA tw_outbox")
    url = make_url(pg_url).update_query_dict({"options": "-c search_path=tw_outbox"})
    store = await open_store(url.render_as_string(hide_password=False))
    try:
        await store.migrate()
        j = make_job("greet", now=datetime.now(UTC), task=python_task(f"{TASKS}:hello"))
        await store.create_jobs([(j, [])])
        with pytest.raises(NotFound), conn.transaction():  # not in the search_path
            outbox.enqueue(conn, "greet")
        with pytest.raises(ValidationError, match="schema"), conn.transaction():
            outbox.enqueue(conn, "greet", schema="")
        with conn.transaction():
            conn.execute("INSERT INTO app_orders VALUES ('o1')")  # the app's table: public
            run_id = outbox.enqueue(conn, "greet", schema="tw_outbox", idempotency_key="k")
            again = outbox.enqueue(conn, "greet", schema="tw_outbox", idempotency_key="k")
        assert again == run_id
        assert await run_ids(store) == [run_id]
        detail = await store.get_run(run_id)
        assert detail is not None and detail.run.job_name == "greet"
    finally:
        await store.close()
        conn.execute("DROP SCHEMA tw_outbox CASCADE")
