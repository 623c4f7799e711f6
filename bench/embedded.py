"""Benchmark of embedded mode (`tickwork up` on SQLite), end to end through the HTTP API.

Starts a real `tickwork up` process on a free port with a fresh data dir, submits work through
the public API, and reads the outcome from the run history tickwork itself recorded:

  W1  throughput: N no-op python `now` jobs submitted in batches; jobs/s from the first
      request until the last task run succeeded. Once with a plain function (run on a
      worker thread) and once with an `async def` (run on the event loop).
  W2  immediate start latency at a steady rate: one `POST /jobs` per job; start latency =
      task run started_at - run created_at (both stamped by the server).
  W3  `at` lateness: jobs due at distinct instants a few seconds ahead; lateness =
      started_at - logical date (the due instant).
  W4  cron lateness: many `* * * * *` jobs firing at the next minute boundary.

  W1 (enqueue) as bench/peers measures distributed mode: N runs of one existing job through
      ``POST /jobs/{name}/runs/batch``, the task-queue way; the issue's W1 end to end.

Usage: .venv/bin/python bench/embedded.py [--jobs 5000] [--workers 32] [--skip-cron]
       [--only w1s,w1a,w1e,w2,w3,w4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2

NOOP = {"kind": "python", "target": "tickwork.examples:noop"}  # a plain (sync) function
ANOOP = {"kind": "python", "target": "tickwork.examples:anoop"}  # an async def


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Server:
    url: str
    db: Path  # the SQLite file, read directly for timings
    headers: dict[str, str]
    pid: int  # the `tickwork up` process, for its CPU time


def cpu_seconds(pid: int, *, children: bool = True) -> float:
    """User + system CPU time the process and (with ``children``) its live descendants
    (python task processes) have used so far, all threads."""
    ticks, parents = 0, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    for proc, (_, used) in parents.items():
        ancestor = proc
        while ancestor in parents and ancestor != pid and children:
            ancestor = parents[ancestor][0]
        if ancestor == pid:
            ticks += used
    return ticks / os.sysconf("SC_CLK_TCK")


def wakeups(pid: int) -> int:
    """Voluntary context switches of the process's threads so far (each a sleep, and then a
    wake-up the machine has to schedule: on a busy machine each one is a delay)."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        total += sum(int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("vol"))
    return total


def written(pid: int) -> tuple[int, int]:
    """Bytes the process has passed to write(2) and the like so far, and how many calls
    (``/proc/<pid>/io``: SQLite's WAL frames and checkpoints, pipes, sockets)."""
    fields = dict(ln.split(": ") for ln in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["wchar"]), int(fields["syscw"])


@contextmanager
def tickwork_up(workers: int, command: list[str] | None = None) -> Iterator[Server]:
    """`tickwork up` on a fresh data dir; ``command`` runs it instead of the ``tickwork``
    executable (bench/w3_trace.py's probes)."""
    data = Path(tempfile.mkdtemp(prefix="tickwork-bench-"))
    port = free_port()
    exe = Path(sys.executable).with_name("tickwork")
    cmd = [
        *(command or [str(exe)]),
        "up",
        "--data-dir",
        str(data),
        "--port",
        str(port),
        "--concurrency",
        str(workers),
    ]
    log = (data / "server.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        token = (data / "admin.token").read_text().strip()  # written by the first start
        yield Server(url, data / "tickwork.db", {"Authorization": f"Bearer {token}"}, proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if keep := os.environ.get("BENCH_SERVER_LOG"):  # where to keep the server's log
            shutil.copy(data / "server.log", keep)
        shutil.rmtree(data, ignore_errors=True)


#: Seconds `tickwork up` may take to answer /healthz (a loaded machine needs more).
HEALTHY_WITHIN = float(os.environ.get("BENCH_HEALTHY_WITHIN", "30"))


def wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + HEALTHY_WITHIN
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"tickwork up exited with {proc.returncode}")
        try:
            if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"tickwork up did not become healthy within {HEALTHY_WITHIN} s")


def job(name: str, schedule: dict[str, Any], task: dict[str, Any] = NOOP) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "task": task}


def post_batch(client: httpx2.Client, jobs: list[dict[str, Any]]) -> None:
    r = client.post("/api/v1/jobs/batch", json={"jobs": jobs}, timeout=60)
    if r.status_code >= 300:
        raise SystemExit(f"batch refused: {r.status_code} {r.text[:300]}")


def db_rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute(sql, args).fetchall()


def wait_done(db: Path, prefix: str, n: int, timeout: float) -> float:
    """Poll until n task runs of jobs named prefix* succeeded; returns the monotonic time."""
    deadline = time.monotonic() + timeout
    sql = "SELECT count(*) FROM task_runs WHERE state = 'success' AND job_name LIKE ?"
    while time.monotonic() < deadline:
        if db_rows(db, sql, prefix + "%")[0][0] >= n:
            return time.monotonic()
        time.sleep(0.02)
    done = db_rows(db, sql, prefix + "%")[0][0]
    raise SystemExit(f"{prefix}: only {done}/{n} succeeded within {timeout} s")


def parse_ts(value: Any) -> datetime:
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC)
    ts = datetime.fromisoformat(str(value))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def delays_ms(db: Path, prefix: str, since: str) -> list[float]:
    """started_at minus `since` (a task_runs column or runs.created_at), in ms."""
    col = "r.created_at" if since == "created" else "t.logical_date"
    rows = db_rows(
        db,
        f"SELECT t.started_at, {col} FROM task_runs t JOIN runs r ON r.id = t.run_id "
        "WHERE t.job_name LIKE ? AND t.started_at IS NOT NULL",
        prefix + "%",
    )
    return [(parse_ts(a) - parse_ts(b)).total_seconds() * 1000 for a, b in rows]


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 2),
        "p95_ms": round(pct(values, 95), 2),
        "p99_ms": round(pct(values, 99), 2),
        "max_ms": round(max(values), 2),
    }


def w1_throughput(
    srv: Server,
    n: int,
    task: dict[str, Any],
    prefix: str,
    *,
    batch: int = 500,
) -> dict[str, float]:
    chunks = [
        [job(f"{prefix}{i}", {"kind": "now"}, task) for i in range(s, min(s + batch, n))]
        for s in range(0, n, batch)
    ]
    with (
        httpx2.Client(base_url=srv.url, headers=srv.headers) as client,
        ThreadPoolExecutor(2) as pool,
    ):
        t0, cpu0 = time.monotonic(), cpu_now(srv)
        list(pool.map(lambda c: post_batch(client, c), chunks))
        submitted = time.monotonic()
        done = wait_done(srv.db, prefix, n, timeout=300)
    return throughput(srv, n, (t0, submitted, done), cpu0)


def cpu_now(srv: Server) -> tuple[float, ...]:
    alone = cpu_seconds(srv.pid, children=False)
    return (cpu_seconds(srv.pid), alone, wakeups(srv.pid), *written(srv.pid))


def throughput(
    srv: Server, n: int, times: tuple[float, float, float], cpu0: tuple[float, ...]
) -> dict[str, float]:
    """W1's figures; CPU per job of `tickwork up` with its task processes, and alone, and
    the up process's threads' wake-ups, bytes written and write calls per job."""
    t0, submitted, done = times
    total, alone, woken, wrote, writes = (a - b for a, b in zip(cpu_now(srv), cpu0, strict=True))
    return {
        "jobs": n,
        "submit_s": round(submitted - t0, 3),
        "total_s": round(done - t0, 3),
        "jobs_per_s": round(n / (done - t0), 1),
        "server_cpu_us_per_job": round(total / n * 1e6),
        "up_process_cpu_us_per_job": round(alone / n * 1e6),
        "up_wakeups_per_job": round(woken / n, 2),
        "up_written_kb_per_job": round(wrote / n / 1024, 1),
        "up_writes_per_job": round(writes / n, 1),
    }


#: A cron job that never fires by itself (and is paused): W1's enqueue variant runs it.
NEVER = {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"}


def w1_enqueue(srv: Server, n: int, prefix: str, *, batch: int = 2500) -> dict[str, float]:
    """W1 task-queue style, as bench/peers submits in distributed mode: one existing job and
    N runs of it through ``POST /jobs/{name}/runs/batch`` (2 rows per run, not a job's 4)."""
    name = f"{prefix}jobs"
    with httpx2.Client(base_url=srv.url, headers=srv.headers, timeout=60) as client:
        client.post("/api/v1/jobs", json=job(name, NEVER, ANOOP)).raise_for_status()
        client.post(f"/api/v1/jobs/{name}/pause").raise_for_status()
        chunks: list[dict[str, Any]] = [
            {"items": [{} for _ in range(s, min(s + batch, n))]} for s in range(0, n, batch)
        ]
        with ThreadPoolExecutor(2) as pool:
            t0, cpu0 = time.monotonic(), cpu_now(srv)
            url = f"/api/v1/jobs/{name}/runs/batch"
            list(pool.map(lambda c: client.post(url, json=c).raise_for_status(), chunks))
            submitted = time.monotonic()
            done = wait_done(srv.db, prefix, n, timeout=300)
    return throughput(srv, n, (t0, submitted, done), cpu0)


def w2_latency(srv: Server, rate: float, seconds: float) -> dict[str, float]:
    n = int(rate * seconds)
    with httpx2.Client(base_url=srv.url, headers=srv.headers) as client:
        start = time.monotonic()
        for i in range(n):
            pause = start + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            r = client.post("/api/v1/jobs", json=job(f"w2-{i}", {"kind": "now"}))
            r.raise_for_status()
    wait_done(srv.db, "w2-", n, timeout=60)
    return summary(delays_ms(srv.db, "w2-", "created"))


def w3_at_lateness(srv: Server, n: int) -> dict[str, float]:
    base = datetime.now(UTC) + timedelta(seconds=3)
    step = 5.0 / n
    jobs = [
        job(f"w3-{i}", {"kind": "at", "at": (base + timedelta(seconds=i * step)).isoformat()})
        for i in range(n)
    ]
    cpu0, woken0 = cpu_seconds(srv.pid), wakeups(srv.pid)
    with httpx2.Client(base_url=srv.url, headers=srv.headers) as client:
        for s in range(0, n, 500):
            post_batch(client, jobs[s : s + 500])
    wait_done(srv.db, "w3-", n, timeout=60)
    cpu = cpu_seconds(srv.pid) - cpu0  # mostly scheduler passes while the jobs wait
    woken = wakeups(srv.pid) - woken0
    # On a loaded machine the batch may be created after some of its instants: those are
    # late before tickwork could start them, so they are counted apart.
    created_late = db_rows(
        srv.db,
        "SELECT count(*) FROM runs WHERE job_name LIKE 'w3-%' AND created_at > logical_date",
    )[0][0]
    return {
        **summary(delays_ms(srv.db, "w3-", "logical")),
        "server_cpu_s": round(cpu, 2),
        "up_wakeups_per_run": round(woken / n, 1),
        "created_after_due": created_late,
    }


def w4_cron_lateness(srv: Server, n: int) -> dict[str, float]:
    jobs = [job(f"w4-{i}", {"kind": "cron", "cron": "* * * * *"}) for i in range(n)]
    with httpx2.Client(base_url=srv.url, headers=srv.headers) as client:
        for s in range(0, n, 500):
            post_batch(client, jobs[s : s + 500])
    wait_done(srv.db, "w4-", n, timeout=90)
    return summary(delays_ms(srv.db, "w4-", "logical"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="W1 job count")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rate", type=float, default=50.0, help="W2 jobs per second")
    parser.add_argument("--skip-cron", action="store_true", help="skip W4 (waits for a minute)")
    parser.add_argument("--w1-only", action="store_true", help="W1 only")
    parser.add_argument("--cron-jobs", type=int, default=100, help="W4: jobs firing together")
    parser.add_argument(
        "--only", default="", help=f"comma-separated workloads out of {','.join(WORKLOADS)}"
    )
    args = parser.parse_args()
    chosen = [w for w in WORKLOADS if not args.skip_cron or w != "w4"]
    if args.w1_only:
        chosen = ["w1s", "w1a", "w1e"]
    if args.only:
        chosen = [w for w in args.only.split(",") if w in WORKLOADS]
    results: dict[str, Any] = {"workers": args.workers, "cpus": os.cpu_count()}
    with tickwork_up(args.workers) as srv:
        for w in chosen:
            title, run = WORKLOADS[w]
            results[title] = run(srv, args)
    print(json.dumps(results, indent=2))


WORKLOADS: dict[str, tuple[str, Any]] = {
    "w1s": (
        "W1 throughput, sync no-op, create jobs",
        lambda srv, a: w1_throughput(srv, a.jobs, NOOP, "w1s-"),
    ),
    "w1a": (
        "W1 throughput, async no-op, create jobs",
        lambda srv, a: w1_throughput(srv, a.jobs, ANOOP, "w1a-"),
    ),
    "w1e": (
        "W1 throughput, async no-op, enqueue runs",
        lambda srv, a: w1_enqueue(srv, a.jobs, "w1e-"),
    ),
    "w2": ("W2 immediate start latency", lambda srv, a: w2_latency(srv, a.rate, 5.0)),
    "w3": ("W3 at lateness", lambda srv, a: w3_at_lateness(srv, 500)),
    "w4": ("W4 cron lateness", lambda srv, a: w4_cron_lateness(srv, a.cron_jobs)),
}


if __name__ == "__main__":
    main()
