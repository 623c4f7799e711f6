"""Pools: named slot limits. A task run holds its ``pool_slots`` while queued or running.

Slots in use are not counted in a column: they are the sum over the pool's queued and running
task runs, so whatever ends a task run (its worker, the reaper failing a zombie, a cancel)
gives its slots back. Nothing can leak.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tickwork.core.model import Pool, TaskRunState
from tickwork.ports import PoolUsage
from tickwork.store.schema import pools, task_runs

#: The states in which a task run holds its pool slots.
HOLDING = (TaskRunState.QUEUED.value, TaskRunState.RUNNING.value)


def set_pool(conn: Connection, pool: Pool, now: datetime) -> bool:
    """Create or resize a pool; True if it was created."""
    changed = conn.execute(
        sa.update(pools)
        .where(pools.c.name == pool.name)
        .values(slots=pool.slots, description=pool.description, updated_at=now)
    )
    if changed.rowcount:
        return False
    conn.execute(
        pools.insert().values(
            name=pool.name,
            slots=pool.slots,
            description=pool.description,
            created_at=now,
            updated_at=now,
        )
    )
    return True


def delete_pool(conn: Connection, name: str) -> bool:
    return bool(conn.execute(sa.delete(pools).where(pools.c.name == name)).rowcount)


def used_slots(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Slots held per pool (queued and running task runs)."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    rows = conn.execute(
        sa.select(task_runs.c.pool, sa.func.sum(task_runs.c.pool_slots))
        .where(task_runs.c.pool.in_(wanted), task_runs.c.state.in_(HOLDING))
        .group_by(task_runs.c.pool)
    )
    used = dict.fromkeys(wanted, 0)
    used.update({name: int(total) for name, total in rows})
    return used


def pool_usage(conn: Connection, names: list[str] | None) -> list[PoolUsage]:
    query = sa.select(pools).order_by(pools.c.name)
    if names is not None:
        query = query.where(pools.c.name.in_(names))
    rows = list(conn.execute(query).mappings())
    used = used_slots(conn, [r["name"] for r in rows])
    return [
        PoolUsage(
            pool=Pool(name=r["name"], slots=r["slots"], description=r["description"]),
            used=used[r["name"]],
        )
        for r in rows
    ]
