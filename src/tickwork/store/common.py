"""Small helpers shared by the query modules: batching, bind parameters, error translation."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tickwork.core.errors import Conflict
from tickwork.ports import TaskKey
from tickwork.store.schema import task_runs

T = TypeVar("T")

#: Keys per ``WHERE (id, attempt) IN (…)`` statement; keeps well under every backend's
#: bound-parameter limit (SQLite 32766, PostgreSQL 65535) while a batch stays one round trip.
KEYS_PER_STATEMENT = 1000


def chunked(items: Sequence[T], size: int = KEYS_PER_STATEMENT) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def key_in(keys: Sequence[TaskKey]) -> sa.ColumnElement[bool]:
    """``id IN (…) AND (id, attempt) IN (…)`` for a chunk of keys.

    The plain ``id IN`` is there for the planner: SQLite does not use the primary key for a
    row-value ``IN`` and would instead scan every task run in the filtered state (all the
    queued ones, on a claim), making each batch cost O(backlog).
    """
    return sa.and_(
        task_runs.c.id.in_([task_run_id for task_run_id, _ in keys]),
        sa.tuple_(task_runs.c.id, task_runs.c.attempt).in_(list(keys)),
    )


def param(column: sa.Column[Any]) -> sa.BindParameter[Any]:
    """A named bind parameter typed like ``column``, for executemany updates."""
    return sa.bindparam(f"p_{column.name}", type_=column.type)


_PARTITION_PKEY = re.compile(r"_(p\d{6}|default)_pkey")


def conflict_from(exc: IntegrityError) -> Conflict | None:
    """The domain error for a unique violation, or None for an integrity error we do not map."""
    # On PostgreSQL a primary key is checked per partition: ``task_runs_p202611_pkey``.
    text = _PARTITION_PKEY.sub("_pkey", str(exc.orig))
    if "uq_jobs_live_name" in text or "jobs.name" in text:
        return Conflict("name", "a live job with this name already exists")
    if any(name in text for name in ("uq_runs_job_logical_date", "run_keys_pkey")) or (
        "runs.logical_date" in text
    ):
        return Conflict("logical_date", "the job already has a run for this logical date")
    if "jobs_pkey" in text or "jobs.id" in text:
        return Conflict("id", "a job with this id already exists")
    if "task_runs_pkey" in text or "task_runs.id" in text:
        return Conflict("id", "a task run with this id already exists")
    if "runs_pkey" in text or "runs.id" in text:
        return Conflict("id", "a run with this id already exists")
    if "foreign key" in text.lower():
        return Conflict("reference", "refers to a job, run or task run that does not exist")
    return None
