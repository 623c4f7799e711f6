"""The worker's one-row claim and completion (``store/pg_hot.py``) on PostgreSQL, one at a
time as at low load (W2): the server backend's CPU per statement, PostgreSQL's own choice of
plans against the generic plans ``pg_hot`` now asks for, interleaved.

    .venv/bin/python bench/worker_statements.py [--runs 3000] [--chunk 50] [--postgres URL]

It creates ``runs`` jobs with one queued run each (in batches, not measured), then claims
and completes their task runs one per statement, ``chunk`` task runs at a time on each of two
autocommit psycopg connections in turn: ``auto`` (``plan_cache_mode = auto``, as before) and
``generic`` (what ``pg_hot`` sets). Interleaving keeps the comparison fair on a machine whose
load moves. The backend's CPU comes from ``/proc/<pid>/schedstat`` (the server must run on
this machine); medians and lower quartiles of the chunks are printed, the first chunk of each
connection left out (its statements are not prepared yet).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url
from store_ops import T0, _create_pg_database, _drop_pg_database, _job_with_run

from tickwork.core.model import Outcome, TaskRunState
from tickwork.store import open_store, pg_hot

MODES = ("auto", "generic")


def _cpu_us(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e3


async def _connect(libpq: str, mode: str) -> tuple[psycopg.AsyncConnection[Any], int]:
    conn = await psycopg.AsyncConnection.connect(libpq, autocommit=True)
    await pg_hot.claim(conn, [], "w", T0)  # pg_hot sets its session up on first use
    if mode == "auto":
        await conn.execute("SET plan_cache_mode = auto")
    row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
    assert row is not None
    return conn, row[0]


async def bench(url: str, n: int, chunk: int) -> dict[str, tuple[list[float], list[float]]]:
    store = await open_store(url)
    await store.migrate()
    libpq = make_url(url).set(drivername="postgresql").render_as_string(False)
    conns = {mode: await _connect(libpq, mode) for mode in MODES}
    spent: dict[str, tuple[list[float], list[float]]] = {mode: ([], []) for mode in MODES}
    try:
        items = [_job_with_run(f"job-{i}") for i in range(n)]
        for i in range(0, n, 500):
            await store.create_jobs(items[i : i + 500])
        keys = [(runs[0].task_runs[0].id, 1) for _, runs in items]
        now = T0 + timedelta(seconds=1)
        for turn, start in enumerate(range(0, n, chunk)):
            mode = MODES[turn % len(MODES)]
            (conn, pid), part = conns[mode], keys[start : start + chunk]
            before = _cpu_us(pid)
            for k in part:
                await pg_hot.claim(conn, [k], "w", now)
            claimed = _cpu_us(pid)
            for k in part:
                done = Outcome(k[0], 1, TaskRunState.SUCCESS, now, worker_id="w")
                await pg_hot.complete(conn, [done])
            if turn >= len(MODES):
                spent[mode][0].append((claimed - before) / len(part))
                spent[mode][1].append((_cpu_us(pid) - claimed) / len(part))
    finally:
        for conn, _ in conns.values():
            await conn.close()
        await store.close()
    return spent


def _summary(values: list[float]) -> str:
    low = statistics.quantiles(values, n=4)[0]
    return f"median {statistics.median(values):6,.0f}  p25 {low:6,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--chunk", type=int, default=50)
    default_pg = os.environ.get(
        "TICKWORK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    parser.add_argument("--postgres", default=default_pg)
    args = parser.parse_args()
    name, url = _create_pg_database(args.postgres)
    try:
        spent = asyncio.run(bench(url, args.runs, args.chunk))
    finally:
        _drop_pg_database(args.postgres, name)
    print("backend CPU µs per one-row statement")
    for mode, (claims, completions) in spent.items():
        print(f"{mode:<8} claim {_summary(claims)}   complete {_summary(completions)}")


if __name__ == "__main__":
    main()
