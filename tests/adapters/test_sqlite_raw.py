"""The SQLite hot path's row binding (store/sqlite_raw.py): a batch binds each distinct value
object once, and what it binds is what binding row by row gives; the enqueue's live-version
check reads what SQLAlchemy's select reads."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from tests.contract.factory import T0, make_job
from tickwork.store import sqlite_raw as raw
from tickwork.store.rows import job_to_row
from tickwork.store.schema import jobs, metadata, task_runs

COLUMNS = ("id", "due_at", "config", "upstream")


def test_bound_rows_equal_binding_each_row_with_shared_and_distinct_values() -> None:
    shared_at = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    shared_config = {"target": "m:f", "kwargs": {"n": 1}}
    rows = [
        ("a", shared_at, shared_config, []),
        ("b", shared_at, shared_config, ["x"]),
        ("c", shared_at + timedelta(microseconds=1), {"target": "m:g"}, None),
        ("d", None, {"target": "m:g"}, None),  # equal to c's config, another object
    ]
    assert raw.bound_rows(task_runs, COLUMNS, rows) == [
        raw.bound(task_runs, COLUMNS, row) for row in rows
    ]
    bound = raw.bound_rows(task_runs, COLUMNS, rows)
    assert bound[0][1] == "2026-12-01 23:00:00.000000"
    assert bound[2][1] == "2026-12-01 23:00:00.000001"
    assert bound[3][1] is None


def test_a_value_changed_between_batches_is_bound_anew() -> None:
    config: dict[str, object] = {"target": "m:f"}
    first = raw.bound_rows(task_runs, COLUMNS, [("a", None, config, [])])
    config["target"] = "m:g"  # same object, new content: nothing is remembered across calls
    second = raw.bound_rows(task_runs, COLUMNS, [("a", None, config, [])])
    assert first[0][2] != second[0][2]
    assert "m:g" in second[0][2]


def test_decoded_rows_read_as_sqlalchemy_reads_them_each_stored_value_converted_once() -> None:
    stored = [
        ("a", "2026-12-01 23:00:00.000000", '{"target": "m:f"}', "[]"),
        ("b", "2026-12-01 23:00:00.000000", '{"target": "m:f"}', '["x"]'),
        ("c", "2026-12-01 23:00:00.000001", '{"target": "m:g"}', "[]"),
        ("d", None, '{"target": "m:g"}', "[]"),
    ]
    rows = raw.decoded(task_runs, COLUMNS, stored)
    at = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    assert [(r["id"], r["due_at"], r["config"], r["upstream"]) for r in rows] == [
        ("a", at, {"target": "m:f"}, []),
        ("b", at, {"target": "m:f"}, ["x"]),
        ("c", at + timedelta(microseconds=1), {"target": "m:g"}, []),
        ("d", None, {"target": "m:g"}, []),
    ]
    assert rows[0]["config"] is rows[1]["config"]  # one JSON text, decoded once
    assert rows[0]["due_at"] is rows[1]["due_at"]


def test_live_versions_read_what_sqlalchemy_reads_leaving_out_deleted_and_unknown_jobs(
    tmp_path: Path,
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'live.db'}")
    metadata.create_all(engine)
    kept = [
        dataclasses.replace(make_job(name), updated_at=T0 + timedelta(microseconds=n))
        for n, name in enumerate("ab")
    ]
    gone = make_job("c")
    with engine.begin() as conn:
        for job in [*kept, gone]:
            conn.execute(jobs.insert().values(job_to_row(job)))
        conn.execute(jobs.update().where(jobs.c.id == gone.id).values(deleted_at=T0))
        ids = [job.id for job in [*kept, gone]] + ["no-such-job"]
        live = raw.live_versions(conn, jobs, ids)
        query = sa.select(jobs.c.id, jobs.c.updated_at).where(
            jobs.c.id.in_(ids), jobs.c.deleted_at.is_(None)
        )
        assert live == {row[0]: row[1] for row in conn.execute(query)}
    assert live == {job.id: job.updated_at for job in kept}
    assert all(at.tzinfo is UTC for at in live.values())  # compares equal to the job's own
    engine.dispose()
