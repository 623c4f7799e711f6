"""r0008 on a populated PostgreSQL database: rows survive in their months, keys hold."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command

from tests.contract.factory import make_job, make_run
from tests.contract.schema_diff import insert_as_of
from tests.pg import PostgresServer, create_database, drop_database
from tickwork.core.errors import Conflict
from tickwork.core.model import TaskRunState
from tickwork.ids import new_id
from tickwork.store import open_store
from tickwork.store.engine import normalize_url
from tickwork.store.migrate import alembic_config
from tickwork.store.rows import job_to_row, run_to_row, task_run_to_row, task_to_row
from tickwork.store.schema import attempts, jobs, runs, task_logs, task_runs, tasks

pytestmark = pytest.mark.postgres


@pytest.fixture
def old_db(postgres_server: PostgresServer) -> Iterator[str]:
    if postgres_server.url is None:
        pytest.skip("PostgreSQL unavailable")
    name = f"tickwork_r0008_{os.getpid()}_{os.urandom(3).hex()}"
    url = create_database(postgres_server.url, name)
    yield url
    drop_database(postgres_server.url, name)


async def test_r0008_partitions_a_populated_database(old_db: str) -> None:
    engine = sa.create_engine(normalize_url(old_db))
    job = make_job("old-job")
    made = [datetime(2026, 9, 15, tzinfo=UTC), datetime(2026, 10, 15, tzinfo=UTC)]
    olds = []
    for i, when in enumerate(made):
        new = make_run(job, when, state=TaskRunState.SUCCESS)
        run = dataclasses.replace(new.run, id=new_id(int(when.timestamp() * 1000)))
        tr = dataclasses.replace(new.task_runs[0], id=new_id(int(when.timestamp() * 1000) + i))
        olds.append((run, dataclasses.replace(tr, run_id=run.id)))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "r0006")
        insert_as_of(conn, jobs, [job_to_row(job)])
        insert_as_of(conn, tasks, [task_to_row(job.id, 0, job.tasks[0])])
        insert_as_of(conn, runs, [run_to_row(r) for r, _ in olds])
        insert_as_of(conn, task_runs, [task_run_to_row(t) for _, t in olds])
        insert_as_of(
            conn,
            attempts,
            [
                {
                    "task_run_id": t.id,
                    "attempt": 1,
                    "state": "success",
                    "finished_at": r.logical_date,
                }
                for r, t in olds
            ],
        )
        insert_as_of(
            conn,
            task_logs,
            [
                {
                    "task_run_id": t.id,
                    "seq": 0,
                    "attempt": 1,
                    "stream": "stdout",
                    "data": "x",
                    "created_at": r.logical_date,
                }
                for r, t in olds
            ],
        )
    store = await open_store(old_db)
    try:
        await store.migrate()
        with engine.connect() as conn:
            placed = conn.execute(
                sa.text(
                    "SELECT tableoid::regclass::text FROM runs UNION ALL "
                    "SELECT tableoid::regclass::text FROM task_runs UNION ALL "
                    "SELECT tableoid::regclass::text FROM attempts UNION ALL "
                    "SELECT tableoid::regclass::text FROM task_logs"
                )
            ).scalars()
            assert sorted(placed) == sorted(
                f"{t}_p2026{m}"
                for t in ("runs", "task_runs", "attempts", "task_logs")
                for m in ("09", "10")
            )
            partitioned = conn.execute(
                sa.text("SELECT count(*) FROM pg_partitioned_table")
            ).scalar()
            assert partitioned == 4
            keys = conn.execute(sa.text("SELECT run_id FROM run_keys ORDER BY run_id")).scalars()
            assert list(keys) == sorted(r.id for r, _ in olds)
        for run, task_run in olds:
            detail = await store.get_run(run.id)
            assert detail is not None and [t.id for t in detail.task_runs] == [task_run.id]
            assert len(detail.attempts) == 1
            assert [c.data for c in await store.read_logs(task_run.id)] == ["x"]
        # (job, logical date) is still unique after the move to run_keys.
        with pytest.raises(Conflict) as caught:
            await store.create_runs([make_run(job, made[0])])
        assert caught.value.field == "logical_date"
    finally:
        await store.close()
        engine.dispose()
