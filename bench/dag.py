"""Per-edge latency of DAG workflows, end to end through a real `tickwork up` (SQLite).

A job whose tasks form a linear chain of N no-op python tasks (t0 -> t1 -> ... -> tN-1) is
submitted through the API, R times one after another. Per-edge latency is how long a task
waited after its upstream finished: ``started_at(t_i) - finished_at(t_i-1)``, both stamped by
the server. For comparison the same process measures a single-task job's start latency
(``started_at - run created_at``), submitted one at a time the same way.

Usage: .venv/bin/python bench/dag.py [--chain 20] [--repeats 20] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from embedded import (
    NOOP,
    Server,
    db_rows,
    parse_ts,
    summary,
    tickwork_up,
    wait_done,
)


def chain(name: str, length: int) -> dict[str, Any]:
    tasks = [
        {**NOOP, "name": f"t{i}", "upstream": [f"t{i - 1}"] if i else []} for i in range(length)
    ]
    return {"name": name, "schedule": {"kind": "now"}, "tasks": tasks}


def edge_delays_ms(db: Path, prefix: str) -> list[float]:
    rows = db_rows(
        db,
        "SELECT t.run_id, t.task_name, t.started_at, t.finished_at FROM task_runs t "
        "WHERE t.job_name LIKE ?",
        prefix + "%",
    )
    by_run: dict[str, dict[str, tuple[Any, Any]]] = {}
    for run_id, name, started, finished in rows:
        by_run.setdefault(run_id, {})[name] = (started, finished)
    delays = []
    for tasks in by_run.values():
        for i in range(1, len(tasks)):
            started = parse_ts(tasks[f"t{i}"][0])
            upstream_done = parse_ts(tasks[f"t{i - 1}"][1])
            delays.append((started - upstream_done).total_seconds() * 1000)
    return delays


def chains(srv: Server, length: int, repeats: int) -> dict[str, Any]:
    with httpx2.Client(base_url=srv.url, headers=srv.headers) as client:
        t0 = time.monotonic()
        for r in range(repeats):
            client.post("/api/v1/jobs", json=chain(f"chain{r}-", length)).raise_for_status()
            wait_done(srv.db, f"chain{r}-", length, timeout=120)
        elapsed = time.monotonic() - t0
    stats: dict[str, Any] = summary(edge_delays_ms(srv.db, "chain"))
    stats["chain_s_mean"] = round(elapsed / repeats, 3)
    return stats


def single_starts(srv: Server, n: int) -> dict[str, float]:
    with httpx2.Client(base_url=srv.url, headers=srv.headers) as client:
        for i in range(n):
            body = {"name": f"single{i}", "schedule": {"kind": "now"}, "task": NOOP}
            client.post("/api/v1/jobs", json=body).raise_for_status()
            wait_done(srv.db, f"single{i}", 1, timeout=60)
    rows = db_rows(
        srv.db,
        "SELECT t.started_at, r.created_at FROM task_runs t JOIN runs r ON r.id = t.run_id "
        "WHERE t.job_name LIKE 'single%'",
    )
    return summary([(parse_ts(a) - parse_ts(b)).total_seconds() * 1000 for a, b in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tickwork_up(args.workers) as srv:
        results = {
            f"edge_latency_chain_{args.chain}": chains(srv, args.chain, args.repeats),
            "single_task_start_latency": single_starts(srv, args.repeats * 5),
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
