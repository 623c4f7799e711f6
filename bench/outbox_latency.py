"""Commit to queued: how soon the leader dispatches a run an outbox commit made, in a real cluster.

Usage: .venv/bin/python bench/outbox_latency.py [--runs 20] [--server-path DIR]

Starts a private PostgreSQL and Redis and, through the CLI, 2 ``tickwork scheduler`` replicas,
1 worker and the API (``tests/e2e/cluster.py``); creates a job through the API, then commits
``--runs`` ``outbox.enqueue`` calls one after another (0.3 s apart, so the leader is back
asleep each time) and reads each task run's ``queued_at - due_at`` (the outbox's instant
before the insert to the leader's pass that queued it). ``--server-path`` runs the tickwork
processes, and the outbox, from another source tree (``git archive <rev> src | tar -x -C DIR``)
for a before/after in one session. Also prints which replicas logged that they listen.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--server-path", default="")
    args = parser.parse_args()
    if args.server_path and os.environ.get("TW_BENCH_REEXEC") != "1":
        env = os.environ | {"PYTHONPATH": f"{args.server_path}:{REPO}", "TW_BENCH_REEXEC": "1"}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    sys.path.insert(0, str(REPO))
    import psycopg

    from tests.e2e.cluster import Cluster, Timings
    from tests.pg import ThrowawayPostgres, find_bin_dir, free_port
    from tests.redis_server import PrivateRedis
    from tickwork import outbox

    bin_dir = find_bin_dir()
    assert bin_dir is not None, "no PostgreSQL binaries for a private server"
    pg = ThrowawayPostgres(bin_dir, free_port())
    path = {"PYTHONPATH": f"{args.server_path}:{REPO}"} if args.server_path else {}
    root = Path(tempfile.mkdtemp(prefix="tickwork-outbox-latency-"))
    cluster = Cluster(root, pg, PrivateRedis(), Timings(), extra_env=path)
    pg.start()
    cluster.redis.start()
    try:
        cluster.start(schedulers=2, workers=1)
        never = {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"}
        job = {"name": "noop", "schedule": never, "task": {"kind": "shell", "argv": ["true"]}}
        cluster.client().create_job(job)  # type: ignore[arg-type]
        with psycopg.connect(cluster.db_url, autocommit=True) as conn:
            waits = [_one(conn, outbox) for _ in range(args.runs)]
        print(
            f"commit -> queued: median {statistics.median(waits):.1f} ms, "
            f"max {max(waits):.1f} ms ({len(waits)} runs)"
        )
        for proc in cluster.of_kind("scheduler"):
            print(
                f"{proc.name}: listened {proc.log_text().count('listening for enqueues')} time(s)"
            )
    finally:
        cluster.close()


def _one(conn: object, outbox: object) -> float:
    with conn.transaction():  # type: ignore[attr-defined]
        run_id = outbox.enqueue(conn, "noop")  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = conn.execute(  # type: ignore[attr-defined]
            "SELECT extract(epoch FROM queued_at - due_at) FROM task_runs"
            " WHERE run_id = %s AND queued_at IS NOT NULL",
            (run_id,),
        ).fetchone()
        if row:
            time.sleep(0.3)  # the leader goes back to sleep before the next one
            return float(row[0]) * 1000
        time.sleep(0.005)
    raise AssertionError(f"run {run_id} not queued within 10 s")


if __name__ == "__main__":
    main()
