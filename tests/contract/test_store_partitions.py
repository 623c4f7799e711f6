"""Monthly partitions and retention on PostgreSQL; retention on SQLite; run_keys uniqueness."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tests.contract.factory import key, make_job, make_run, outcome
from tickwork.core.model import Job, LogChunk, NewRun, TaskRunState
from tickwork.ids import new_id
from tickwork.store import SqlStore, partitions
from tickwork.store.engine import normalize_url
from tickwork.store.pg_dialect import PostgresDialect
from tickwork.store.pg_direct import DirectWriter
from tickwork.store.run_keys import has_key
from tickwork.store.runs import insert_new_runs

S = TaskRunState
FOUR = ("runs", "task_runs", "attempts", "task_logs")


def ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


def run_made_at(
    job: Job,
    made: datetime,
    logical_date: datetime,
    *,
    task_made: datetime | None = None,
    state: TaskRunState = S.QUEUED,
) -> NewRun:
    """A run whose id was made at ``made`` (its task run's at ``task_made``)."""
    new = make_run(job, logical_date, state=state)
    run = dataclasses.replace(new.run, id=new_id(ms(made)))
    task_run = dataclasses.replace(
        new.task_runs[0], id=new_id(ms(task_made or made)), run_id=run.id
    )
    return NewRun(run=run, task_runs=(task_run,))


def existing(conn: Connection, names: list[str]) -> set[str]:
    found = conn.execute(
        sa.text("SELECT relname FROM pg_class WHERE relname IN :names").bindparams(
            sa.bindparam("names", expanding=True)
        ),
        {"names": names},
    )
    return set(found.scalars())


@pytest.fixture
def pg(pg_url: str) -> Iterator[Connection]:
    engine = sa.create_engine(normalize_url(pg_url))
    # Autocommit: a transaction left open would hold locks that partition changes wait for.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        yield conn
    engine.dispose()


async def _finish(store: SqlStore, new: NewRun, when: datetime) -> None:
    (tr,) = new.task_runs
    await store.claim([key(tr)], "w1", when)
    await store.append_logs([LogChunk(tr.id, 0, 1, "stdout", "hello", when)])
    await store.complete([outcome(tr, S.SUCCESS, when)])


@pytest.mark.postgres
async def test_partitions_are_created_for_this_month_and_two_ahead(
    pg_store: SqlStore, pg: Connection
) -> None:
    done = await pg_store.maintain_partitions(datetime(2031, 11, 20, tzinfo=UTC))
    months = ("203111", "203112", "203201")
    expected = {f"{table}_p{m}" for table in FOUR for m in months}
    assert set(done.created) == expected
    assert existing(pg, sorted(expected)) == expected
    again = await pg_store.maintain_partitions(datetime(2031, 11, 20, tzinfo=UTC))
    assert again.created == [] and again.dropped == []
    # Rows of such a month land in its partition, found through the parent table.
    job = make_job("ahead")
    await pg_store.create_jobs([(job, [])])
    new = run_made_at(job, datetime(2031, 12, 5, tzinfo=UTC), datetime(2031, 12, 5, tzinfo=UTC))
    await pg_store.create_runs([new])
    where = pg.execute(
        sa.text("SELECT tableoid::regclass::text FROM runs WHERE id = :id"), {"id": new.run.id}
    ).scalar()
    assert where == "runs_p203112"


@pytest.mark.postgres
async def test_retention_drops_whole_old_months_child_first_across_a_month_boundary(
    pg_store: SqlStore, pg: Connection
) -> None:
    await pg_store.maintain_partitions(datetime(2020, 1, 10, tzinfo=UTC), ahead=2)
    job = make_job("kept-history")
    await pg_store.create_jobs([(job, [])])
    jan_end = datetime(2020, 1, 31, 23, 59, 59, 999000, tzinfo=UTC)
    # A January run whose task run was made a millisecond later, in February.
    straddling = run_made_at(job, jan_end, jan_end, task_made=jan_end + timedelta(milliseconds=2))
    feb_open = run_made_at(
        job, datetime(2020, 2, 10, tzinfo=UTC), datetime(2020, 2, 10, tzinfo=UTC)
    )
    march = run_made_at(job, datetime(2020, 3, 2, tzinfo=UTC), datetime(2020, 3, 2, tzinfo=UTC))
    await pg_store.create_runs([straddling, feb_open, march])
    await _finish(pg_store, straddling, jan_end)
    await _finish(pg_store, march, datetime(2020, 3, 2, tzinfo=UTC))
    assert (
        pg.execute(
            sa.text("SELECT tableoid::regclass::text FROM task_runs WHERE id = :id"),
            {"id": straddling.task_runs[0].id},
        ).scalar()
        == "task_runs_p202002"
    )

    # Cutoff 2020-02-18: only January ends before it.
    done = await pg_store.maintain_partitions(datetime(2020, 3, 20, tzinfo=UTC), retention_days=30)
    assert sorted(done.dropped) == sorted(f"{t}_p202001" for t in FOUR)
    assert existing(pg, [f"{t}_p202001" for t in FOUR]) == set()
    assert await pg_store.get_run(straddling.run.id) is None
    assert await pg_store.get_task_run(straddling.task_runs[0].id) is None
    assert await pg_store.read_logs(straddling.task_runs[0].id) == []
    orphans = pg.execute(
        sa.text(
            "SELECT (SELECT count(*) FROM task_runs t WHERE NOT EXISTS "
            "(SELECT 1 FROM runs r WHERE r.id = t.run_id)) + (SELECT count(*) FROM attempts a "
            "WHERE NOT EXISTS (SELECT 1 FROM task_runs t WHERE t.id = a.task_run_id)) + "
            "(SELECT count(*) FROM task_logs l WHERE NOT EXISTS "
            "(SELECT 1 FROM task_runs t WHERE t.id = l.task_run_id)) + (SELECT count(*) "
            "FROM run_keys k WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = k.run_id))"
        )
    ).scalar()
    assert orphans == 0
    # Its key went with it: the same fire can be recorded again.
    again = run_made_at(job, datetime(2020, 3, 21, tzinfo=UTC), jan_end)
    await pg_store.create_runs([again])

    # Cutoff 2020-03-21: February has ended, but its run is unfinished, so it stays.
    done = await pg_store.maintain_partitions(datetime(2020, 4, 20, tzinfo=UTC), retention_days=30)
    assert done.dropped == [] and done.kept == ["2020-02: an unfinished run"]
    assert (await pg_store.get_run(feb_open.run.id)) is not None
    await pg_store.cancel_run(feb_open.run.id, datetime(2020, 4, 20, tzinfo=UTC))
    done = await pg_store.maintain_partitions(datetime(2020, 4, 20, tzinfo=UTC), retention_days=30)
    assert sorted(done.dropped) == sorted(f"{t}_p202002" for t in FOUR)
    assert await pg_store.get_run(march.run.id) is not None  # March is inside the retention


@pytest.mark.postgres
async def test_two_transactions_taking_one_fire_at_once_insert_it_once(
    pg_store: SqlStore, pg_url: str
) -> None:
    fire = datetime(2029, 5, 1, tzinfo=UTC)
    job = make_job("raced", cron="0 * * * *", next_fire_at=fire)
    await pg_store.create_jobs([(job, [])])
    first, second = make_run(job, fire), make_run(job, fire)
    engine = sa.create_engine(normalize_url(pg_url))
    dialect = PostgresDialect(DirectWriter(engine.url))

    def second_one() -> list[str]:
        with engine.begin() as other_conn:
            return [tr.id for tr in insert_new_runs(other_conn, dialect, [second])]

    pool = ThreadPoolExecutor(1)
    try:
        with engine.begin() as conn:
            assert [tr.id for tr in insert_new_runs(conn, dialect, [first])] == [
                first.task_runs[0].id
            ]
            later = pool.submit(second_one)
            _wait_for_lock_wait(engine)
            assert not later.done()
        assert later.result(timeout=10) == []  # it waited for the first, then lost
    finally:
        pool.shutdown(wait=True)
        engine.dispose()
    runs = (await pg_store.list_runs(job_id=job.id)).runs
    assert [r.id for r in runs] == [first.run.id]


def _wait_for_lock_wait(engine: sa.Engine) -> None:
    """Until another session waits on a lock (the second insert of the key)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with engine.connect() as probe:
            waiting = probe.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar()
        if waiting:
            return
        time.sleep(0.02)
    raise AssertionError("the second transaction never waited for the first")


@pytest.mark.postgres
async def test_concurrent_materialize_calls_for_one_fire_make_one_run(
    pg_store: SqlStore, pg_url: str
) -> None:
    from tickwork.store import open_store

    fire = datetime(2029, 6, 1, tzinfo=UTC)
    job = make_job("twice", cron="0 * * * *", next_fire_at=fire)
    await pg_store.create_jobs([(job, [])])
    other = await open_store(pg_url)
    try:
        import asyncio

        later = fire + timedelta(hours=1)
        results = await asyncio.gather(
            pg_store.materialize(job.id, fire, later, [make_run(job, fire)]),
            other.materialize(job.id, fire, later, [make_run(job, fire)]),
        )
    finally:
        await other.close()
    assert sorted(len(r) for r in results) == [0, 0]  # scheduled task runs are not returned
    assert len((await pg_store.list_runs(job_id=job.id)).runs) == 1


async def test_a_duplicate_run_is_refused_on_both_backends(store: SqlStore) -> None:
    from tickwork.core.errors import Conflict

    job = make_job("dup")
    await store.create_jobs([(job, [make_run(job)])])
    with pytest.raises(Conflict) as caught:
        await store.create_runs([make_run(job)])
    assert caught.value.field == "logical_date"


def test_only_enqueue_runs_have_no_key() -> None:
    run = make_run(make_job("k")).run
    assert has_key(run)
    assert not has_key(dataclasses.replace(run, trigger="enqueue"))  # type: ignore[arg-type]


async def test_sqlite_retention_deletes_old_finished_runs_in_batches(
    sqlite_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partitions, "RETENTION_BATCH", 2)
    now = datetime(2030, 6, 1, tzinfo=UTC)
    job = make_job("old")
    await sqlite_store.create_jobs([(job, [])])
    old = [
        run_made_at(job, now - timedelta(days=40 + i), now - timedelta(days=40 + i))
        for i in range(3)
    ]
    open_old = run_made_at(
        job, now - timedelta(days=50), now + timedelta(days=1), state=S.SCHEDULED
    )
    recent = run_made_at(job, now - timedelta(days=5), now - timedelta(days=5))
    await sqlite_store.create_runs([*old, open_old, recent])
    for new in [*old, recent]:
        await _finish(sqlite_store, new, new.run.logical_date)

    done = await sqlite_store.maintain_partitions(now, retention_days=30)
    assert done.deleted_runs == 3 and done.created == [] and done.dropped == []
    for new in old:
        assert await sqlite_store.get_run(new.run.id) is None
        assert await sqlite_store.read_logs(new.task_runs[0].id) == []
    assert await sqlite_store.get_run(open_old.run.id) is not None
    assert await sqlite_store.get_run(recent.run.id) is not None
    assert (await sqlite_store.maintain_partitions(now)).deleted_runs == 0  # None: keep all
