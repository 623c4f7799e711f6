"""Peers side by side on the distributed-mode workloads, in one run on this machine.

  W1  throughput: N no-op jobs submitted as fast as the peer's client allows (its bulk API
      where it has one), first submit -> last job start (a no-op's start is its completion).
  W2  start latency at a steady rate: worker start - enqueue time (p50/p95/p99).
  W3  lateness of N jobs due at distinct instants 5-15 s ahead, through each peer's own
      delayed-job feature: start - due instant (p50/p99/max).

Each contender runs alone (the others stopped), with ``--workers`` worker processes, on one
private redis-server this script starts on a free port and, where needed, a fresh PostgreSQL
database on the local server. Peers are installed in their own venvs under bench/.venvs/.

Usage: python bench/peers/run.py [--peers celery,huey,dramatiq,procrastinate,tickwork]
       [--w1 20000] [--w2-rate 200 --w2-seconds 10 --w2-lanes 1] [--w3 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import peers.catalog  # (registers the peers)
import peers.tickwork  # noqa: F401  (registers tickwork's distributed mode)
from peers.contender import DEFAULT, REGISTRY, Services
from peers.infra import Procs, exit_on_signals, psql, redis_command, redis_server
from peers.report import configs, costs, table

BENCH = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument(
        "--peers",
        default=",".join(DEFAULT),
        help=f"comma-separated contenders (default %(default)s; all: {','.join(REGISTRY)})",
    )
    p.add_argument("--w1", type=int, default=20_000, help="W1 job count")
    p.add_argument("--w2-rate", type=float, default=200.0, help="W2 jobs per second")
    p.add_argument("--w2-seconds", type=float, default=10.0, help="W2 duration")
    p.add_argument(
        "--w2-lanes",
        type=int,
        default=1,
        help="W2 producer threads, each with its own client, job i sent by thread i %% LANES at "
        "its paced instant (1: one thread, a slow call lowers the rate offered; more: the rate "
        "is offered as many request handlers would, calls overlap)",
    )
    p.add_argument("--w3", type=int, default=1000, help="W3 job count")
    p.add_argument("--workers", type=int, default=2, help="worker processes per contender")
    p.add_argument("--pg-host", default="127.0.0.1")
    p.add_argument("--pg-port", type=int, default=5432)
    p.add_argument("--pg-user", default="postgres")
    p.add_argument("--out", type=Path, help="results dir (default bench/results/peers-<time>)")
    args = p.parse_args(argv)
    if args.w2_lanes < 1:
        p.error("--w2-lanes must be at least 1")
    os.environ["PEERBENCH_W2_LANES"] = str(args.w2_lanes)  # the producers read it
    unknown = set(args.peers.split(",")) - set(REGISTRY)
    if unknown:
        p.error(f"unknown contenders {sorted(unknown)}; registered: {sorted(REGISTRY)}")
    return args


def machine() -> dict[str, Any]:
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    redis = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True, check=False
    )
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "uptime": uptime.stdout.strip(),
        "loadavg": os.getloadavg(),
        "redis_server": redis.stdout.strip(),
    }


def pg_version(args: argparse.Namespace) -> str:
    try:
        return psql(args.pg_host, args.pg_port, args.pg_user, "SHOW server_version")
    except (RuntimeError, OSError) as exc:
        return f"unavailable: {exc}"


def run_one(name: str, services: Services, args: argparse.Namespace) -> dict[str, Any]:
    """start, W1, W2, W3, stop; a failure is recorded (and the run goes on), never hidden."""
    result: dict[str, Any] = {"name": name}
    contender = REGISTRY[name](services)
    try:
        say(name, "starting")
        result["info"] = asdict(contender.start())
        say(name, f"W1 {args.w1} jobs")
        result["w1"] = asdict(contender.w1(args.w1))
        say(name, f"W2 {args.w2_rate:g}/s for {args.w2_seconds:g} s, {args.w2_lanes} lane(s)")
        result["w2"] = asdict(contender.w2(args.w2_rate, args.w2_seconds))
        say(name, f"W3 {args.w3} jobs due 5-15 s ahead")
        result["w3"] = asdict(contender.w3(args.w3))
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        say(name, f"FAILED: {result['error']}")
    finally:
        contender.stop()
    return result


def say(name: str, what: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {what}", flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    exit_on_signals()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir: Path = (args.out or BENCH / "results" / f"peers-{stamp}").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = machine() | {"args": vars(args) | {"out": str(out_dir)}, "postgres": pg_version(args)}
    print(f"load before: {meta['uptime']}", flush=True)
    procs = Procs()
    results: list[dict[str, Any]] = []
    try:
        with redis_server(procs, out_dir) as port:
            services = Services(
                redis_url=f"redis://127.0.0.1:{port}/0",
                pg_host=args.pg_host,
                pg_port=args.pg_port,
                pg_user=args.pg_user,
                workers=args.workers,
                out_dir=out_dir,
                venv_root=BENCH / ".venvs",
                procs=procs,
            )
            for name in args.peers.split(","):
                redis_command(port, "FLUSHALL")
                results.append(run_one(name, services, args))
                (out_dir / f"{name}.json").write_text(json.dumps(results[-1], indent=2))
    finally:
        procs.stop_all()
    finish(meta, results, out_dir)


def finish(meta: dict[str, Any], results: list[dict[str, Any]], out_dir: Path) -> None:
    after = machine()
    meta["uptime_after"], meta["loadavg_after"] = after["uptime"], after["loadavg"]
    (out_dir / "run.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    text = f"{table(results)}\n\n{costs(results)}\n\n{configs(results)}\n"
    (out_dir / "table.md").write_text(text)
    print(f"\nload before: {meta['uptime']}\nload after:  {meta['uptime_after']}")
    print(f"{meta['redis_server']}; PostgreSQL {meta['postgres']}; results in {out_dir}\n")
    print(text)


if __name__ == "__main__":
    main()
