"""API CPU per single enqueue, in process: the app driven by raw ASGI calls (no uvicorn, no HTTP
client), over a real PostgreSQL store (metrics on, as ``tickwork api`` runs it) and an in-memory
broker (or, with ``--redis URL``, the Redis broker under a key prefix of its own). Less noisy
than a real server under load, since only this process's CPU is counted.

    PYTHONPATH=/tmp/base/src .venv/bin/python bench/api_inprocess.py [--runs 1000] [--width 32]
        [--redis redis://127.0.0.1:6379/0]

Creates a fresh database on ``--pg`` (dropped afterwards), applies a job with a params contract,
warms up, then prints the process CPU per ``POST /api/v1/jobs/{name}/runs`` with one request
at a time, and with ``--width`` requests in flight at once (group commit's case).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import psycopg
import redis.asyncio as aioredis

from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.observe.store import observed_store
from tickwork.ports import Scope
from tickwork.store import open_store

JOB = {
    "name": "q",
    "schedule": {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"},
    "task": {"kind": "python", "target": "tickwork.examples:anoop"},
    "params": {"properties": {"i": {"type": "integer"}}},
}


async def call(app: Any, token: str, path: str, body: bytes) -> int:
    headers = [
        (b"host", b"bench"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 1), "server": ("b", 80),
    }  # fmt: skip
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def measure(url: str, runs: int, width: int, redis: str | None) -> None:
    store = observed_store(await open_store(url))
    await store.migrate()
    prefix = f"bench-inprocess-{os.getpid()}"
    broker = MemoryBroker() if redis is None else RedisStreamsBroker(redis, prefix=prefix)
    services = Services(store, broker)
    security = Security.over(services)
    app = create_app(services, security=security)
    token = (await security.tokens.create("bench", Scope.ADMIN)).secret
    assert await call(app, token, "/api/v1/jobs", json.dumps(JOB).encode()) == 201
    path, body = "/api/v1/jobs/q/runs", b'{"params": {"i": 1}}'
    for _ in range(300):
        assert await call(app, token, path, body) == 201
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(runs):
        await call(app, token, path, body)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    print(f"one at a time: {cpu / runs * 1e6:,.0f} µs CPU/request, {runs / wall:,.0f}/s")
    left = iter(range(runs))

    async def lane() -> None:
        for _ in left:
            await call(app, token, path, body)

    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(width)))
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    print(f"{width} in flight: {cpu / runs * 1e6:,.0f} µs CPU/request, {runs / wall:,.0f}/s")
    await store.close()
    if isinstance(broker, RedisStreamsBroker):
        await broker.close()
        client = aioredis.Redis.from_url(redis)  # type: ignore[arg-type]
        keys = [k async for k in client.scan_iter(match=f"*{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--redis", help="the Redis broker on this URL (default: in memory)")
    args = parser.parse_args()
    db = f"bench_api_inprocess_{os.getpid()}"
    with psycopg.connect(args.pg, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{db}"')
    try:
        url = args.pg.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
        asyncio.run(measure(f"{url}/{db}", args.runs, args.width, args.redis))
    finally:
        with psycopg.connect(args.pg, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    main()
