"""The SQLite hot path's row binding (store/sqlite_raw.py): a batch binds each distinct value
object once, and what it binds is what binding row by row gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.store import sqlite_raw as raw
from tickwork.store.schema import task_runs

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
