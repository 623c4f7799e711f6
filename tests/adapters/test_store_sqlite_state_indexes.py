"""SQLite: a task run is in the state index of its state only (a finished one in none), and
the reads that look for task runs by state find them through those partial indexes, not by
scanning the table (SQLite uses a partial index only for a query naming its own term)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

from tests.contract.factory import at, key, make_job, make_run, outcome
from tickwork.core.model import TaskRunState
from tickwork.store import dashboard_reads, dispatch, facts
from tickwork.store.sql import SqlStore

S = TaskRunState
STATE_INDEXES = ("scheduled", "up_for_retry", "queued", "running", "failed")


def _entries(url: str) -> dict[str, int]:
    """Entries in each state index, read from SQLite's page statistics."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT name, sum(ncell) FROM dbstat WHERE name LIKE 'ix_task_runs_%'"
                " AND pagetype = 'leaf' GROUP BY name"
            ).all()
    finally:
        engine.dispose()
    found = {str(name).removeprefix("ix_task_runs_"): int(n) for name, n in rows}
    return {state: found.get(state, 0) for state in STATE_INDEXES}


async def test_a_task_run_is_in_its_state_index_only(
    sqlite_store: SqlStore, sqlite_url: str
) -> None:
    job = make_job("states")
    runs = [make_run(job, at(i), state=S.QUEUED) for i in range(3)]
    runs.append(make_run(job, at(60)))  # scheduled
    await sqlite_store.create_jobs([(job, runs)])
    queued = [nr.task_runs[0] for nr in runs[:3]]
    assert _entries(sqlite_url) == {**dict.fromkeys(STATE_INDEXES, 0), "scheduled": 1, "queued": 3}

    running = await sqlite_store.claim([key(tr) for tr in queued], "w1", at(1))
    assert _entries(sqlite_url)["queued"] == 0
    assert _entries(sqlite_url)["running"] == 3

    ends = [S.SUCCESS, S.FAILED, S.UP_FOR_RETRY]
    await sqlite_store.complete(
        [
            outcome(tr, state, at(2), retry_at=at(30))
            for tr, state in zip(running, ends, strict=True)
        ]
    )
    assert _entries(sqlite_url) == {
        "scheduled": 1,
        "up_for_retry": 1,
        "queued": 0,
        "running": 0,
        "failed": 1,
    }


def _plans(url: str, read: Callable[[Connection], object]) -> list[str]:
    """The plan steps of every statement on task_runs that ``read`` ran, as it bound them."""
    engine = sa.create_engine(url)
    ran: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, sql: str, parameters: Any, *_: Any) -> None:
        if "task_runs" in sql:
            ran.append((sql, parameters))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        with engine.connect() as conn:
            read(conn)
            ran_now = list(ran)
            return [
                str(row[3])
                for sql, parameters in ran_now
                for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", parameters).all()
            ]
    finally:
        engine.dispose()


READS: dict[str, Callable[[Connection], object]] = {
    "due": lambda conn: dispatch.due_task_runs(conn, at(0), 10),
    "next due": dispatch.next_due_at,
    "reconciler": lambda conn: conn.execute(dispatch.QUEUED_BEFORE, {"before": at(0), "limit": 9}),
    "reaper": lambda conn: conn.execute(dispatch.STALE_BEFORE, {"before": at(0), "limit": 9}),
    "facts": lambda conn: facts.read_facts(conn, at(0), at(-60)),
    "queue depths": dashboard_reads.queue_depths,
    "failing": lambda conn: dashboard_reads.failing_now(conn, at(-60), 10),
    "running": lambda conn: dashboard_reads.running_task_runs(conn, 10),
    "dead letters": lambda conn: dashboard_reads.dead_letter_count(conn, 100),
}
USES = {
    "due": ("scheduled", "up_for_retry"),
    "next due": ("scheduled", "up_for_retry"),
    "reconciler": ("queued",),
    "reaper": ("running",),
    "facts": ("queued", "running", "scheduled", "up_for_retry", "failed"),
    "queue depths": ("queued",),
    "failing": ("failed",),
    "running": ("running",),
    "dead letters": ("failed",),
}


@pytest.mark.parametrize("name", sorted(READS))
async def test_reads_by_state_use_the_partial_indexes(
    sqlite_store: SqlStore, sqlite_url: str, name: str
) -> None:
    plan = _plans(sqlite_url, READS[name])
    steps = " | ".join(plan)
    for state in USES[name]:
        assert f"INDEX ix_task_runs_{state} " in f"{steps} ", (state, plan)
    assert not [step for step in plan if step in ("SCAN task_runs", "SCAN t")], plan
