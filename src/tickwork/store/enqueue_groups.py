"""Several independent enqueues in one transaction (``Store.enqueue_each``, the API's group
commit): each entry checked on its own, the rows of those that pass inserted together.

Each entry is checked before anything of its own is written: its job version first (one
read for the group), then its ``Idempotency-Key`` (``record_key``, which writes the key or
finds it taken). An entry that fails a check is left out with the error that says why, and
has written nothing but, at most, the removal of its own expired key record: so the others
commit without a savepoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.ports import EnqueueEntry, JobChanged, KeyTaken
from tickwork.store import sqlite_raw as raw
from tickwork.store.dialect import Dialect
from tickwork.store.idempotency import record_key
from tickwork.store.run_rows import rows_of_copies
from tickwork.store.runs import insert_run_rows
from tickwork.store.schema import jobs


def enqueue_each(
    conn: Connection, dialect: Dialect, entries: Sequence[EnqueueEntry]
) -> list[Exception | None]:
    """Insert the runs of the entries that pass their checks; each entry's outcome."""
    live = _live_versions(conn, {e.planned_from.id for e in entries})
    outcomes: list[Exception | None] = []
    for e in entries:
        outcome: Exception | None = None
        if live.get(e.planned_from.id) != e.planned_from.updated_at:
            outcome = changed(e)
        elif e.receipt is not None:
            try:
                record_key(conn, dialect, e.receipt)
            except KeyTaken as taken:
                outcome = taken
        outcomes.append(outcome)
    kept = [c for e, o in zip(entries, outcomes, strict=True) if o is None for c in e.copies]
    if kept:
        insert_run_rows(conn, dialect, rows_of_copies(kept))
    return outcomes


def outcomes_of(
    entries: Sequence[EnqueueEntry], inserted: Iterable[tuple[Any, ...]]
) -> list[Exception | None]:
    """Each entry's outcome from the rows of ``Dialect.grouped_insert``: (run id, task runs
    inserted) per run inserted."""
    rows = list(inserted)
    ids = {row[0] for row in rows}
    expected = 0
    outcomes: list[Exception | None] = []
    for e in entries:
        went = [c.run_id in ids for c in e.copies]
        if all(went):
            outcomes.append(None)
            expected += sum(len(c.task_run_ids) for c in e.copies)
        elif not any(went):
            outcomes.append(changed(e))
        else:
            raise RuntimeError(f"inserted {went.count(True)} of {len(went)} runs of one entry")
    if rows and rows[0][1] != expected:
        raise RuntimeError(f"inserted {rows[0][1]} of {expected} task runs")
    return outcomes


def changed(entry: EnqueueEntry) -> JobChanged:
    return JobChanged(f"job {entry.planned_from.name!r} changed since it was read")


def _live_versions(conn: Connection, ids: set[str]) -> dict[str, datetime]:
    """Each live (not deleted) job's ``updated_at``, of the jobs ``ids``."""
    if conn.dialect.name == "sqlite":
        return raw.live_versions(conn, jobs, sorted(ids))
    query = sa.select(jobs.c.id, jobs.c.updated_at).where(
        jobs.c.id.in_(sorted(ids)), jobs.c.deleted_at.is_(None)
    )
    return {row[0]: row[1] for row in conn.execute(query)}
