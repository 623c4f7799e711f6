"""Benchmark of a large backfill in embedded mode (`tickwork up` on SQLite), through the API.

  quiet    live-run start latency with nothing else going on: `now` jobs at a steady rate,
           start latency = task run started_at - run created_at (both stamped by the server);
  backfill a backfill of N dates (default 10,000) of an hourly no-op python job: runs/s from
           its creation until it is `completed`; meanwhile the same live-run latency probe.

The live p99 while the backfill runs must stay within 2x the quiet p99 (the backfill runs
below live work: a lower priority lane and a share of the slots).

Usage: .venv/bin/python bench/backfill.py [--dates 10000] [--workers 16] [--max-active 32]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from embedded import NOOP, Server, delays_ms, job, summary, tickwork_up, wait_done

START = datetime(2024, 1, 1, tzinfo=UTC)


def probe(srv: Server, prefix: str, rate: float, seconds: float) -> dict[str, float]:
    """`now` jobs at ``rate`` per second for ``seconds``; their start latencies."""
    n = int(rate * seconds)
    with httpx2.Client(base_url=srv.url, headers=srv.headers) as client:
        began = time.monotonic()
        for i in range(n):
            pause = began + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            client.post(
                "/api/v1/jobs", json=job(f"{prefix}{i}", {"kind": "now"})
            ).raise_for_status()
    wait_done(srv.db, prefix, n, timeout=120)
    return summary(delays_ms(srv.db, prefix, "created"))


def create_backfill(client: httpx2.Client, dates: int, max_active: int) -> dict[str, Any]:
    hourly = {"kind": "cron", "cron": "0 * * * *", "timezone": "UTC"}
    client.post("/api/v1/jobs", json=job("bf", hourly, NOOP)).raise_for_status()
    end = START + timedelta(hours=dates - 1)
    body = {"job": "bf", "from": START.isoformat(), "to": end.isoformat(), "max_active": max_active}
    r = client.post("/api/v1/backfills", json=body)
    r.raise_for_status()
    made: dict[str, Any] = r.json()
    return made


def wait_completed(client: httpx2.Client, backfill_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found: dict[str, Any] = client.get(f"/api/v1/backfills/{backfill_id}").json()
        if found["state"] == "completed":
            return found
        time.sleep(0.5)
    raise SystemExit(f"backfill {backfill_id} not completed within {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dates", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--max-active", type=int, default=32)
    parser.add_argument("--rate", type=float, default=5.0, help="live jobs per second")
    parser.add_argument("--probe-seconds", type=float, default=20.0)
    args = parser.parse_args()
    with (
        tickwork_up(args.workers) as srv,
        httpx2.Client(base_url=srv.url, headers=srv.headers, timeout=60) as client,
    ):
        quiet = probe(srv, "quiet-", args.rate, args.probe_seconds)
        t0 = time.monotonic()
        made = create_backfill(client, args.dates, args.max_active)
        during = probe(srv, "during-", args.rate, args.probe_seconds)
        done = wait_completed(client, made["id"], timeout=3600)
        elapsed = time.monotonic() - t0
    result = {
        "dates": made["progress"]["total"],
        "succeeded": done["progress"]["succeeded"],
        "backfill_s": round(elapsed, 1),
        "backfill_runs_per_s": round(made["progress"]["total"] / elapsed, 1),
        "live_quiet": quiet,
        "live_during_backfill": during,
        "p99_ratio": round(during["p99_ms"] / quiet["p99_ms"], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
