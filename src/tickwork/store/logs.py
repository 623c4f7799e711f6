"""Captured task output: appended in batches by workers, read (and tailed) by seq."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import LogChunk
from tickwork.store.dialect import Dialect, insert_ignoring
from tickwork.store.rows import log_from_row, log_to_row
from tickwork.store.schema import task_logs


def append_logs(conn: Connection, dialect: Dialect, chunks: Sequence[LogChunk]) -> None:
    if not chunks:
        return
    # A worker that re-sends a batch after a lost reply must not fail on the chunks stored.
    stmt = insert_ignoring(dialect, task_logs, ["task_run_id", "seq"])
    conn.execute(stmt, [log_to_row(c) for c in chunks])


def read_logs(conn: Connection, task_run_id: str, after_seq: int, limit: int) -> list[LogChunk]:
    query = (
        sa.select(task_logs)
        .where(task_logs.c.task_run_id == task_run_id, task_logs.c.seq > after_seq)
        .order_by(task_logs.c.seq)
        .limit(limit)
    )
    return [log_from_row(r) for r in (conn.execute(query)).mappings()]
