"""``run_keys``: one run per (job, logical date) on PostgreSQL, where ``runs`` is partitioned
by id and so cannot hold that unique constraint itself (SQLite keeps it on ``runs``).

Every write of a run writes its key in the same transaction, and every delete of a run
deletes it, so two schedulers can never materialize the same fire twice: the second insert
of a key waits for the first transaction and then conflicts, exactly as the unique index did.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from tickwork.core.model import NewRun, Run
from tickwork.store.schema import run_keys

#: Runs of this trigger (task-queue style, many per instant) are not unique per logical date.
KEYLESS_TRIGGER = "enqueue"


def has_key(run: Run) -> bool:
    """Whether ``run`` is unique per (job, logical date): the one place that says so."""
    return str(run.trigger) != KEYLESS_TRIGGER


def _row(run: Run) -> dict[str, Any]:
    return {"job_id": run.job_id, "logical_date": run.logical_date, "run_id": run.id}


def insert_keys(conn: Connection, items: Sequence[Run]) -> None:
    """The keys of runs being inserted; a taken one raises IntegrityError (``run_keys_pkey``)."""
    rows = [_row(run) for run in items if has_key(run)]
    if rows:
        conn.execute(run_keys.insert(), rows)


_TAKE = (
    postgresql.insert(run_keys)
    .on_conflict_do_nothing(index_elements=["job_id", "logical_date"])
    .returning(run_keys.c.run_id)
)


def take_keys(conn: Connection, items: Sequence[NewRun]) -> list[NewRun]:
    """Take the free keys of ``items`` (PostgreSQL); returns the runs to insert: those that
    got their key, and those that need none."""
    keyed = [n.run for n in items if has_key(n.run)]
    if not keyed:
        return list(items)
    won = set(conn.execute(_TAKE, [_row(run) for run in keyed]).scalars().all())
    return [n for n in items if n.run.id in won or not has_key(n.run)]


def delete_keys(conn: Connection, job_id: str, runs: Sequence[tuple[str, datetime]]) -> None:
    """Delete the keys of ``runs`` (id, logical date) of one job, deleted with them."""
    if not runs:
        return
    conn.execute(
        sa.delete(run_keys).where(
            run_keys.c.job_id == job_id,
            run_keys.c.logical_date.in_([logical_date for _, logical_date in runs]),
            run_keys.c.run_id.in_([run_id for run_id, _ in runs]),
        )
    )
