"""API CPU per submitted run: a real ``tickwork api`` process (PostgreSQL + Redis), one client.

    .venv/bin/python bench/api_submit.py [--runs 2000] [--batch 5000] [--mode enqueue|jobs]

Creates a fresh PostgreSQL database on ``--pg`` (dropped afterwards), runs ``tickwork db
upgrade`` and ``tickwork api`` on a free port (Redis: ``--redis``, under a key prefix of its
own), then sends ``--runs`` single submits one after another (W2's path: ``POST
/jobs/{name}/runs``, or ``POST /jobs`` with ``--mode jobs``) and ``--bulk`` runs in batches
(W1's path: ``POST /jobs/{name}/runs/batch``, or ``POST /jobs/batch`` of 1,000). It prints the
API process's CPU time (user + system, from ``/proc``) per run for each, and the client's wall
time per request. No worker runs: the runs stay queued.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import httpx2
import psycopg
import redis

from tickwork.sdk import Client, JobInput

TICK = os.sysconf("SC_CLK_TCK")
BIN = Path(sys.executable).with_name("tickwork")
NEVER = {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"}
TASK = {"kind": "python", "target": "tickwork.examples:anoop"}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_ready(url: str, deadline: float) -> None:
    while True:
        try:
            httpx2.get(f"{url}/readyz", timeout=1.0).raise_for_status()
            return
        except httpx2.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _now_job(name: str) -> JobInput:
    return cast(JobInput, {"name": name, "schedule": {"kind": "now"}, "task": TASK})


def measure(args: argparse.Namespace, url: str, token: str, pid: int) -> None:
    with Client(url, token=token, timeout=120.0) as tw:
        params = {"properties": {"i": {"type": "integer"}}}
        job = {"name": "q", "schedule": NEVER, "task": TASK, "params": params}
        tw.apply_job(cast(JobInput, job))

        def single(i: int) -> object:
            if args.mode == "enqueue":
                return tw.enqueue("q", {"i": i})
            return tw.create_job(_now_job(f"s-{i}"))

        for i in range(50):  # warm-up
            single(-i - 1)
        before, t0 = cpu_s(pid), time.perf_counter()
        for i in range(args.runs):
            single(i)
        spent, wall = cpu_s(pid) - before, time.perf_counter() - t0
        print(f"single {args.mode}: API CPU {spent / args.runs * 1e6:,.0f} µs/run, "
              f"wall {wall / args.runs * 1e3:.2f} ms/request ({args.runs} requests)")  # fmt: skip
        size = args.batch if args.mode == "enqueue" else 1000
        if not args.bulk:
            return
        before, t0 = cpu_s(pid), time.perf_counter()
        for start in range(0, args.bulk, size):
            ids = range(start, min(start + size, args.bulk))
            if args.mode == "enqueue":
                tw.enqueue_many("q", [{"i": i} for i in ids])
            else:
                bodies = [
                    {"name": f"b-{i}", "schedule": {"kind": "now"}, "task": TASK} for i in ids
                ]
                tw.create_jobs(bodies)  # type: ignore[arg-type]
        spent, wall = cpu_s(pid) - before, time.perf_counter() - t0
        print(f"bulk {args.mode} ({size}/request): API CPU {spent / args.bulk * 1e6:,.1f} µs/run, "
              f"wall {wall / args.bulk * 1e6:.1f} µs/run ({args.bulk} runs)")  # fmt: skip


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``serving``: where PostgreSQL and Redis are, and the server's code."""
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument(
        "--server-path",
        help="PYTHONPATH of the server processes only, e.g. the src/ of a baseline checkout "
        "(`git archive <rev> src | tar -x -C DIR`) to measure before/after in one session",
    )


@contextmanager
def serving(
    args: argparse.Namespace, command: list[str] | None = None
) -> Iterator[tuple[str, str, int]]:
    """A real ``tickwork api`` on a fresh database: ``(url, admin token, pid)``; the
    database and the Redis keys are dropped afterwards. ``command``: what starts the server
    instead of ``tickwork api`` (``bench/api_trace.py``'s probes)."""
    db = f"bench_api_submit_{os.getpid()}"
    with psycopg.connect(args.pg, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{db}"')
    api = None
    try:
        with tempfile.TemporaryDirectory() as data:
            port = free_port()
            env = os.environ | {
                "TICKWORK_DATABASE_URL": args.pg.rsplit("/", 1)[0].replace(
                    "postgresql://", "postgresql+psycopg://"
                ) + f"/{db}",
                "TICKWORK_REDIS_URL": args.redis,
                "TICKWORK_REDIS_PREFIX": f"bench-api-{os.getpid()}",
                "TICKWORK_PORT": str(port),
                "TICKWORK_DATA_DIR": data,
            }  # fmt: skip
            if args.server_path:
                env["PYTHONPATH"] = args.server_path
            subprocess.run([str(BIN), "db", "upgrade"], env=env, check=True, capture_output=True)
            token = (Path(data) / "admin.token").read_text().strip()
            api = subprocess.Popen(
                command or [str(BIN), "api"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, time.monotonic() + 60)
            print(f"API pid {api.pid}", file=sys.stderr, flush=True)
            yield url, token, api.pid
    finally:
        if api is not None:
            api.terminate()
            api.wait(30)
        with psycopg.connect(args.pg, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        client = redis.Redis.from_url(args.redis)
        keys = list(client.scan_iter(match=f"*bench-api-{os.getpid()}*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="single submits")
    parser.add_argument("--bulk", type=int, default=20000, help="runs submitted in batches")
    parser.add_argument("--batch", type=int, default=5000, help="runs per enqueue batch")
    parser.add_argument("--mode", choices=["enqueue", "jobs"], default="enqueue")
    add_server_options(parser)
    args = parser.parse_args()
    with serving(args) as (url, token, pid):
        measure(args, url, token, pid)


if __name__ == "__main__":
    main()
