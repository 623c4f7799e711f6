"""``enqueue_runs`` (COPY on PostgreSQL), the partial unique index of runs, and migration r0007
upgrading a database that holds runs."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from alembic import command

from tests.contract.factory import T0, make_job, make_run, shell_task
from tests.contract.schema_diff import insert_as_of
from tests.pg import PostgresServer, create_database, drop_database
from tickwork.core.errors import Conflict
from tickwork.core.model import NewRun, RunTrigger, TaskRunState
from tickwork.ports import JobChanged, KeyReceipt, KeyTaken, RunCopy
from tickwork.store import SqlStore, open_store
from tickwork.store.engine import normalize_url
from tickwork.store.migrate import alembic_config, head_revision
from tickwork.store.pg_direct import DIRECT_CONNECTIONS
from tickwork.store.rows import job_to_row, run_to_row, task_run_to_row, task_to_row
from tickwork.store.schema import jobs, runs, task_runs, tasks


def _copies(template: NewRun, count: int, **extra: object) -> list[RunCopy]:
    return [
        RunCopy(
            template=template,
            run_id=f"run-{i}",
            task_run_ids=tuple(f"tr-{i}-{n}" for n in range(len(template.task_runs))),
            configs=tuple({**tr.config, "n": i} for tr in template.task_runs),
            **extra,  # type: ignore[arg-type]
        )
        for i in range(count)
    ]


async def test_enqueue_runs_inserts_copies_sharing_a_logical_date(store: SqlStore) -> None:
    job = make_job("flow", tasks=[shell_task("a"), shell_task("b", upstream=["a"])])
    await store.create_jobs([(job, [])])
    template = make_run(job, T0, state=TaskRunState.QUEUED, trigger=RunTrigger.ENQUEUE)
    await store.enqueue_runs(_copies(template, 3, priority=9))
    page = await store.list_runs(job_id=job.id)
    assert sorted(r.id for r in page.runs) == ["run-0", "run-1", "run-2"]
    assert {(r.logical_date, r.trigger) for r in page.runs} == {(T0, RunTrigger.ENQUEUE)}
    detail = await store.get_run("run-1")
    assert detail is not None
    by_name = {tr.task_name: tr for tr in detail.task_runs}
    assert by_name["a"].id == "tr-1-0" and by_name["b"].id == "tr-1-1"
    assert by_name["a"].config == {"argv": ["true"], "n": 1}
    assert by_name["b"].upstream == ("a",)
    assert {tr.priority for tr in detail.task_runs} == {9}
    assert by_name["a"].retry == job.retry


# PostgreSQL: 1 and 3 runs go in one statement (on the event loop without a key, in the
# key's transaction with one), 40 runs (past pg_enqueue.MAX_ROWS) by COPY.
@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("count", [1, 3, 40])
async def test_enqueue_runs_planned_from_a_changed_job_inserts_nothing(
    store: SqlStore, count: int, keyed: bool
) -> None:
    job = make_job("flow", tasks=[shell_task("a"), shell_task("b", upstream=["a"])])
    await store.create_jobs([(job, [])])
    template = make_run(job, T0, state=TaskRunState.QUEUED, trigger=RunTrigger.ENQUEUE)
    await store.enqueue_runs(_copies(template, count), planned_from=job)
    assert len((await store.list_runs(job_id=job.id, limit=100)).runs) == count
    changed = dataclasses.replace(job, priority=5, updated_at=T0 + timedelta(seconds=1))
    assert await store.update_job(changed, job.updated_at, reschedule=False)
    late = [dataclasses.replace(c, run_id=f"late-{c.run_id}") for c in _copies(template, count)]
    receipt = KeyReceipt("tok", "k", "hash", 201, "{}", T0, T0 + timedelta(days=1))
    with pytest.raises(JobChanged):
        await store.enqueue_runs(late, receipt if keyed else None, planned_from=job)
    await store.delete_job(job.id, T0 + timedelta(seconds=2))
    with pytest.raises(JobChanged):
        await store.enqueue_runs(late, receipt if keyed else None, planned_from=changed)
    assert await store.get_run("late-run-0") is None
    assert await store.get_key("tok", "k", T0) is None
    assert len((await store.list_runs(job_id=job.id, limit=100)).runs) == count


async def test_enqueue_runs_is_all_or_nothing_with_its_key(store: SqlStore) -> None:
    job = make_job("q")
    await store.create_jobs([(job, [])])
    template = make_run(job, T0, trigger=RunTrigger.ENQUEUE)
    receipt = KeyReceipt("tok", "k", "hash", 201, "{}", T0, T0 + timedelta(days=1))
    await store.enqueue_runs(_copies(template, 2), receipt)
    with pytest.raises(KeyTaken):
        await store.enqueue_runs(_copies(template, 2), receipt)
    clash = [*_copies(template, 1), *_copies(template, 1)]  # one id twice: a conflict
    other = KeyReceipt("tok", "k2", "hash", 201, "{}", T0, T0 + timedelta(days=1))
    with pytest.raises(Conflict):
        await store.enqueue_runs(clash, other)
    assert await store.get_key("tok", "k2", T0) is None
    assert len((await store.list_runs(job_id=job.id)).runs) == 2


async def test_a_duplicate_cron_fire_is_still_impossible(store: SqlStore) -> None:
    job = make_job("cron", cron="*/5 * * * *", next_fire_at=T0)
    await store.create_jobs([(job, [])])
    enqueued = make_run(job, T0, trigger=RunTrigger.ENQUEUE)
    await store.enqueue_runs(_copies(enqueued, 1))
    nxt = T0 + timedelta(minutes=5)
    first = await store.materialize(job.id, T0, nxt, [make_run(job, T0, state=TaskRunState.QUEUED)])
    # The schedule moved on, yet a second fire for T0 arrives (another scheduler's plan).
    again = await store.materialize(
        job.id, nxt, nxt, [make_run(job, T0, state=TaskRunState.QUEUED)]
    )
    assert len(first) == 1 and again == []
    triggers = sorted(r.trigger for r in (await store.list_runs(job_id=job.id)).runs)
    assert triggers == [RunTrigger.ENQUEUE, RunTrigger.SCHEDULE]
    with pytest.raises(Conflict) as caught:
        await store.create_runs([make_run(job, T0, trigger=RunTrigger.MANUAL)])
    assert caught.value.field == "logical_date"


# -- migration r0007 on a database with rows ---------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def r0006_url(
    request: pytest.FixtureRequest, tmp_path: object, postgres_server: PostgresServer
) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/old.db"
        return
    if postgres_server.url is None:
        pytest.skip(f"PostgreSQL unavailable: {postgres_server.reason}")
    name = f"tickwork_r0007_{os.getpid()}_{os.urandom(3).hex()}"
    url = create_database(postgres_server.url, name)
    try:
        yield url
    finally:
        drop_database(postgres_server.url, name)


async def test_r0007_upgrades_a_database_with_runs(r0006_url: str) -> None:
    job = make_job("old", tasks=[shell_task("a"), shell_task("b", upstream=["a"])])
    old_runs = [make_run(job, T0 + timedelta(minutes=i)) for i in range(3)]
    engine = sa.create_engine(normalize_url(r0006_url))
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "r0006")
            # Rows as r0006 holds them (today's store also writes run_keys on PostgreSQL).
            insert_as_of(conn, jobs, [job_to_row(job)])
            insert_as_of(conn, tasks, [task_to_row(job.id, i, t) for i, t in enumerate(job.tasks)])
            insert_as_of(conn, runs, [run_to_row(n.run) for n in old_runs])
            insert_as_of(
                conn, task_runs, [task_run_to_row(tr) for n in old_runs for tr in n.task_runs]
            )
    finally:
        engine.dispose()
    store = await open_store(r0006_url)
    try:
        await store.migrate()
        detail = await store.get_run(old_runs[1].run.id)
        assert detail is not None and len(detail.task_runs) == 2
        enqueued = make_run(job, T0, trigger=RunTrigger.ENQUEUE)
        await store.enqueue_runs(_copies(enqueued, 2))
        with pytest.raises(Conflict):
            await store.create_runs([make_run(job, T0)])
        assert len((await store.list_runs(job_id=job.id)).runs) == 5
    finally:
        await store.close()
    engine = sa.create_engine(normalize_url(r0006_url))
    try:
        with engine.connect() as conn:
            assert conn.scalar(sa.select(sa.func.count()).select_from(task_runs)) == 10
            assert conn.scalar(sa.select(sa.func.count()).select_from(runs)) == 5
            if conn.dialect.name == "sqlite":
                assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
            version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
            assert version == head_revision()
    finally:
        engine.dispose()


async def test_enqueue_runs_of_an_id_taken_is_a_conflict_without_a_key(store: SqlStore) -> None:
    job = make_job("q")
    await store.create_jobs([(job, [])])
    template = make_run(job, T0, trigger=RunTrigger.ENQUEUE)
    await store.enqueue_runs(_copies(template, 1), planned_from=job)
    with pytest.raises(Conflict):
        await store.enqueue_runs(_copies(template, 1), planned_from=job)
    assert len((await store.list_runs(job_id=job.id)).runs) == 1


async def test_concurrent_enqueues_all_land(store: SqlStore) -> None:
    # More at once than pg_direct keeps connections for: the rest take the engine's path.
    job = make_job("q")
    await store.create_jobs([(job, [])])
    template = make_run(job, T0, trigger=RunTrigger.ENQUEUE)
    batches = [
        [dataclasses.replace(c, run_id=f"c{i}", task_run_ids=(f"c{i}-t",))]
        for i, c in enumerate(_copies(template, 3 * DIRECT_CONNECTIONS))
    ]
    await asyncio.gather(*(store.enqueue_runs(b, planned_from=job) for b in batches))
    page = await store.list_runs(job_id=job.id, limit=100)
    assert len(page.runs) == 3 * DIRECT_CONNECTIONS
