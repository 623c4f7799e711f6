"""Procrastinate app for the peer benchmark (runs inside bench/.venvs/procrastinate).

Worker: ``procrastinate --log-level warning --app=peer_procrastinate.app worker
--concurrency 10``, once per worker process. PostgreSQL only (LISTEN/NOTIFY on, the default
5 s fetch polling interval). The producer uses the async API on one event loop; for W3 it
defers POOL jobs at a time so that 1,000 single-job transactions finish before the first due
instant (5 s ahead) even on a loaded machine.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime
from typing import Any

import procrastinate
from peer_record import record

app: Any = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("PEERBENCH_PG_DSN", ""))
)


def _noop(tag: str, i: int) -> None:
    record(tag, i)


noop: Any = app.task(name="noop")(_noop)

CHUNK = 1000
POOL = 4  # PsycopgConnector's default pool size
BULK = f"batch_defer_async, {CHUNK} jobs per call (one INSERT each)"


async def _await(awaitable: Any) -> None:
    await awaitable


class Client:
    def __init__(self) -> None:
        self._loop = asyncio.Runner()
        self._loop.run(_await(app.open_async()))

    def submit_bulk(self, tag: str, ids: range) -> None:
        for start in range(ids.start, ids.stop, CHUNK):
            kwargs = [{"tag": tag, "i": i} for i in range(start, min(start + CHUNK, ids.stop))]
            self._loop.run(noop.batch_defer_async(*kwargs))

    def submit(self, tag: str, i: int) -> None:
        self._loop.run(noop.defer_async(tag=tag, i=i))

    def submit_at(self, tag: str, i: int, due: datetime) -> None:
        self._loop.run(noop.configure(schedule_at=due).defer_async(tag=tag, i=i))

    def submit_at_many(self, tag: str, jobs: list[tuple[int, datetime]]) -> list[int]:
        """Defer one job per (id, due instant), POOL at a time (one transaction each, as
        an asyncio user would); returns when each defer returned, in time.time_ns()."""

        async def defer_all() -> list[int]:
            slots = asyncio.Semaphore(POOL)

            async def one(i: int, due: datetime) -> int:
                async with slots:
                    await noop.configure(schedule_at=due).defer_async(tag=tag, i=i)
                    return time.time_ns()

            return list(await asyncio.gather(*(one(i, due) for i, due in jobs)))

        return self._loop.run(defer_all())

    def close(self) -> None:
        self._loop.run(_await(app.close_async()))
        self._loop.close()


def setup() -> None:
    """Create procrastinate's schema in the (fresh, empty) benchmark database."""

    async def apply() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(apply())
