"""Worker registry: which worker processes exist, when each last heartbeated, how busy it is.

For ``tickwork status`` and operators. It decides nothing: a task run's own heartbeat is what
the reaper looks at, so a worker missing from here loses no work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from tickwork.ports import WorkerInfo
from tickwork.store.schema import workers


def register_worker(conn: Connection, worker: WorkerInfo) -> None:
    row = _to_row(worker)
    conn.execute(sa.delete(workers).where(workers.c.id == worker.id))
    conn.execute(workers.insert().values(**row))


def worker_heartbeat(
    conn: Connection, worker_id: str, now: datetime, running: int, stopped: bool
) -> None:
    values: dict[str, Any] = {"heartbeat_at": now, "running": running}
    if stopped:
        values["stopped_at"] = now
    conn.execute(sa.update(workers).where(workers.c.id == worker_id).values(**values))


def list_workers(conn: Connection, seen_since: datetime | None) -> list[WorkerInfo]:
    query = sa.select(workers).order_by(workers.c.id)
    if seen_since is not None:
        query = query.where(workers.c.heartbeat_at >= seen_since)
    return [_from_row(r) for r in conn.execute(query).mappings()]


def forget_workers(conn: Connection, seen_before: datetime) -> int:
    result = conn.execute(sa.delete(workers).where(workers.c.heartbeat_at < seen_before))
    return int(result.rowcount)


def _to_row(w: WorkerInfo) -> dict[str, Any]:
    return {
        "id": w.id,
        "hostname": w.hostname,
        "pid": w.pid,
        "queues": list(w.queues),
        "concurrency": w.concurrency,
        "started_at": w.started_at,
        "heartbeat_at": w.heartbeat_at,
        "running": w.running,
        "stopped_at": w.stopped_at,
        "kind": w.kind,
    }


def _from_row(r: RowMapping) -> WorkerInfo:
    return WorkerInfo(
        id=r["id"],
        hostname=r["hostname"],
        pid=r["pid"],
        queues=tuple(r["queues"]),
        concurrency=r["concurrency"],
        started_at=r["started_at"],
        heartbeat_at=r["heartbeat_at"],
        running=r["running"],
        stopped_at=r["stopped_at"],
        kind=r["kind"],
    )
