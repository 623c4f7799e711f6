"""Producer throughput: per-job ``enqueue`` calls through the SDK to a real ``tickwork api``.

    .venv/bin/python bench/producer.py [--runs 3000] [--in-flight 32] [--server-path DIR]
                                       [--embedded]

Starts ``tickwork api`` on a fresh PostgreSQL database and Redis (as ``bench/api_submit.py``
does, dropped afterwards), applies a job with a params contract, then measures, one after the
other: one thread calling ``Client.enqueue`` in a loop, and one ``AsyncClient`` keeping
``--in-flight`` ``enqueue`` calls in flight (each returns once its run is stored), and the
opt-in batching ``Producer`` (``tickwork.sdk.producer``: calls gathered for ``--linger``
seconds into ``enqueue_many`` requests, all stored when it closes). For each:
jobs/s (wall), the API process's CPU per job and this (client) process's CPU per job. No worker
runs: the runs stay queued.

``--embedded``: the same against ``tickwork up`` (SQLite in a temporary data dir) instead;
there the runs also execute (the task is a no-op in a task process), so the "API" CPU is the
whole process's: the enqueue, the claim and the completion of each run (the task:
``tickwork.examples:sleep``, each call ``{"seconds": 0}``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_submit import BIN, NEVER, TASK, add_server_options, cpu_s, free_port, serving, wait_ready

from tickwork.sdk import AsyncClient, Client, JobInput
from tickwork.sdk.producer import Producer

JOB = "produce"
#: ``--embedded``'s task: the runs execute there, so it must take the calls' parameter (an
#: ``anoop`` run given ``i`` fails: a traceback, two log lines and a failure per run).
SLEEP = {"kind": "python", "target": "tickwork.examples:sleep"}


def report(what: str, runs: int, pid: int, go: Callable[[], None]) -> None:
    api0, me0, t0 = cpu_s(pid), time.process_time(), time.perf_counter()
    go()
    wall, api, me = time.perf_counter() - t0, cpu_s(pid) - api0, time.process_time() - me0
    per = 1e6 / runs
    print(f"{what}: {runs / wall:,.0f} jobs/s, API CPU {api * per:,.0f} µs/job, "
          f"client CPU {me * per:,.0f} µs/job ({runs} jobs, {wall:.1f} s)", flush=True)  # fmt: skip


@contextmanager
def embedded(args: argparse.Namespace) -> Iterator[tuple[str, str, int]]:
    """A real ``tickwork up`` on a fresh SQLite data dir: ``(url, admin token, pid)``."""
    with tempfile.TemporaryDirectory() as data:
        env = os.environ | {"TICKWORK_PORT": str(free_port()), "TICKWORK_DATA_DIR": data}
        if args.server_path:
            env["PYTHONPATH"] = args.server_path
        up = subprocess.Popen([str(BIN), "up"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            url = f"http://127.0.0.1:{env['TICKWORK_PORT']}"
            wait_ready(url, time.monotonic() + 60)
            print(f"up pid {up.pid}", file=sys.stderr, flush=True)
            yield url, (Path(data) / "admin.token").read_text().strip(), up.pid
        finally:
            up.terminate()
            up.wait(30)


def params(i: int) -> dict[str, float]:
    """The call's parameters (``--embedded``: the seconds its task sleeps, 0)."""
    return {"seconds": 0} if EMBEDDED else {"i": i}


EMBEDDED = False


def one_thread(url: str, token: str, runs: int) -> None:
    with Client(url, token=token, timeout=60.0) as tw:
        for i in range(runs):
            tw.enqueue(JOB, params(i))


def batching(url: str, token: str, runs: int, linger: float) -> None:
    with Client(url, token=token, timeout=60.0) as tw, Producer(tw, linger=linger) as producer:
        futures = [producer.enqueue(JOB, params(i)) for i in range(runs)]
    assert all(f.result() for f in futures)  # close() flushed: every run is stored


async def in_flight(url: str, token: str, runs: int, width: int) -> None:
    left = iter(range(runs))

    async def lane(tw: AsyncClient) -> None:
        for i in left:  # the lanes share one iterator: each takes the next number
            await tw.enqueue(JOB, params(i))

    async with AsyncClient(url, token=token, timeout=60.0, max_connections=width) as tw:
        await asyncio.gather(*(lane(tw) for _ in range(width)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3000, help="enqueue calls per measure")
    parser.add_argument("--in-flight", type=int, default=32, help="AsyncClient's calls at once")
    parser.add_argument("--linger", type=float, default=0.005, help="the Producer's, seconds")
    parser.add_argument("--embedded", action="store_true", help="`tickwork up`, not `api`")
    add_server_options(parser)
    args = parser.parse_args()
    global EMBEDDED
    EMBEDDED = args.embedded
    with (embedded if args.embedded else serving)(args) as (url, token, pid):
        field = {"seconds": {"type": "number"}} if EMBEDDED else {"i": {"type": "integer"}}
        contract = {"properties": field}
        task = SLEEP if EMBEDDED else TASK
        with Client(url, token=token) as tw:
            tw.apply_job(cast(JobInput, {"name": JOB, "schedule": NEVER, "task": task,
                                         "params": contract}))  # fmt: skip
        one_thread(url, token, 200)  # warm-up: connections, the job cache, prepared statements
        report("Client.enqueue, one thread", args.runs, pid,
               lambda: one_thread(url, token, args.runs))  # fmt: skip
        width = args.in_flight
        report(f"AsyncClient.enqueue, {width} in flight", args.runs, pid,
               lambda: asyncio.run(in_flight(url, token, args.runs, width)))  # fmt: skip
        linger = args.linger
        report(f"Producer (opt-in batching, linger {linger * 1e3:g} ms), one thread", args.runs,
               pid, lambda: batching(url, token, args.runs, linger))  # fmt: skip


if __name__ == "__main__":
    main()
