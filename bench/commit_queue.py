"""Durable commits queued behind each other's WAL flushes: what W2's path pays per commit
when the API's inserts, the workers' claims and their completions commit side by side.

Streams of paced one-row autocommit inserts (each stream its own connection and thread,
``--rate`` commits a second each, W2's 200 jobs/s by default), first one stream alone,
then ``--streams`` at once (W2 commits three times per job: enqueue, claim, completion);
per run the commit latency of stream 0 (p50 / p90 / p99 ms) and the server's WAL flushes
per commit (``pg_stat_wal.wal_sync``: below 1 when concurrent commits shared a flush).
``pg_stat_wal`` is the cluster's: other clients' commits count too (run it quiet).

    .venv/bin/python bench/commit_queue.py [--rate 200] [--seconds 5] [--streams 3]
"""

from __future__ import annotations

import argparse
import threading
import time

import psycopg

DSN = "host=127.0.0.1 user=postgres dbname=postgres"


def _wal_syncs(conn: psycopg.Connection[tuple[int]]) -> int:
    row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    assert row is not None
    return int(row[0])


def _stream(table: str, rate: float, seconds: float, out: list[float]) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        start = time.perf_counter() + 0.2
        for i in range(int(rate * seconds)):
            at = start + i / rate
            if (pause := at - time.perf_counter()) > 0:
                time.sleep(pause)
            t = time.perf_counter()
            conn.execute(f"INSERT INTO {table} VALUES (%s)", (i,))
            out.append((time.perf_counter() - t) * 1e3)


def run(streams: int, rate: float, seconds: float) -> tuple[list[float], float]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS commit_queue_probe (a int)")
        before = _wal_syncs(conn)
        spans: list[list[float]] = [[] for _ in range(streams)]
        threads = [
            threading.Thread(target=_stream, args=("commit_queue_probe", rate, seconds, s))
            for s in spans
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        syncs = _wal_syncs(conn) - before
        conn.execute("DROP TABLE commit_queue_probe")
    return sorted(spans[0]), syncs / max(sum(len(s) for s in spans), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="commits/s per stream")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--streams", type=int, default=3)
    args = parser.parse_args()
    for streams in (1, args.streams):
        spans, per_commit = run(streams, args.rate, args.seconds)
        at = [spans[min(len(spans) - 1, int(q * len(spans)))] for q in (0.5, 0.9, 0.99)]
        print(
            f"{streams} stream(s) x {args.rate:g}/s: commit ms p50 {at[0]:.2f} p90 {at[1]:.2f}"
            f" p99 {at[2]:.2f}; WAL flushes per commit {per_commit:.2f}"
        )


if __name__ == "__main__":
    main()
