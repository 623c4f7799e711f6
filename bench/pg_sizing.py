"""PostgreSQL sizing at the 1 M-run scale (issue 17, §4): WAL, checkpoints, table and index
sizes, autovacuum and connections per process kind, on a private PostgreSQL server.

A private server (``initdb`` in /tmp on a free port, default settings plus
``log_checkpoints=on``; fsync stays on), a private Redis, and tickwork's distributed stack as in
bench/peers (1 scheduler, ``--workers`` workers x 8, 1 API, started with the CLI). Then
``--runs`` runs enqueued through the enqueue API (``POST /api/v1/jobs/{name}/runs/batch``,
5,000 per request, 2 in flight) in chunks of ``--chunk``, each chunk drained to ``success``
before the next is enqueued, until all ran or ``--max-minutes`` passed (checked before each
chunk). ``--fill N`` first writes N pending `at` jobs in one SQL transaction (bench/scale.py's
fill, the fastest bulk write) and measures that part on its own.

``--advised`` starts the server with deploy/README.md's settings instead (``--settings``) and
sets the per-table autovacuum settings on the hot tables before the load.

After every chunk, since the load began: WAL bytes per run (``pg_current_wal_lsn()`` diffs),
checkpoints timed vs requested (``pg_stat_bgwriter``) and the "checkpoints are occurring too
frequently" warnings in the server's log, table + index sizes per table (partitions summed),
autovacuum/autoanalyze counts and dead tuples, the most connections each process kind held
(``pg_stat_activity`` matched to processes by client port with ``ss -tnp``); at the end also
what ``tickwork doctor`` said about the server.

Usage: nice -n 10 .venv/bin/python bench/pg_sizing.py [--runs 1000000] [--chunk 100000]
       [--max-minutes 60] [--fill 1000000]
       [--advised [--settings max_wal_size=8GB,checkpoint_timeout=15min]]

Results: bench/results/pg-sizing-<stamp>/ (chunks.jsonl, pg-sizing.json, server.log). See
bench/README.md, "PostgreSQL sizing".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers.contender import Services
from peers.infra import Procs, exit_on_signals, redis_server
from peers.tickwork import SPECS, TickworkContender
from pg_private import PrivatePostgres
from scale import FILL, RETRY

BENCH = Path(__file__).resolve().parent
HOT = ("task_runs", "runs", "run_keys", "attempts", "task_logs", "jobs", "tasks", "workers")
#: deploy/README.md's per-table autovacuum settings (set on each partition: PostgreSQL takes
#: no storage parameters on a partitioned table).
AUTOVACUUM = {
    "task_runs": "autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02",
    "runs": "autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02",
    "run_keys": "autovacuum_vacuum_scale_factor = 0.05",
}
ADVISED = "max_wal_size=8GB,checkpoint_timeout=15min"
WAL_POSITION = "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
WARNING = "checkpoints are occurring too frequently"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--runs", type=int, default=1_000_000)
    p.add_argument("--chunk", type=int, default=100_000)
    p.add_argument("--max-minutes", type=float, default=120.0)
    p.add_argument("--fill", type=int, default=0, help="pending `at` jobs written first, in SQL")
    p.add_argument("--advised", action="store_true", help="deploy/README.md's settings")
    p.add_argument("--settings", default=ADVISED, help="server settings with --advised")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    return p.parse_args()


class Sampler(threading.Thread):
    """Every ``every`` s: the connections to the database, per process kind (most seen)."""

    def __init__(self, pg: PrivatePostgres, db: str, roles: dict[int, str], every: float):
        super().__init__(daemon=True)
        self.pg, self.db, self.roles, self.every = pg, db, roles, every
        self.most: dict[str, int] = defaultdict(int)
        self.most_active: dict[str, int] = defaultdict(int)
        self.peak_wal_mb_s = 0.0
        self._wal: tuple[float, int] | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.every):
            try:
                self.sample()
            except (RuntimeError, subprocess.SubprocessError) as exc:
                print(f"  sample failed: {exc}", flush=True)

    def sample(self) -> None:
        now, wal = time.monotonic(), int(self.pg.rows(f"SELECT {WAL_POSITION}")[0][0])
        if self._wal is not None:
            rate = (wal - self._wal[1]) / (now - self._wal[0]) / 2**20
            self.peak_wal_mb_s = max(self.peak_wal_mb_s, round(rate, 1))
        self._wal = (now, wal)
        sql = (
            "SELECT client_port, state FROM pg_stat_activity "
            f"WHERE datname = '{self.db}' AND pid <> pg_backend_pid()"
        )
        owners = port_owners(self.pg.port)
        count: dict[str, int] = defaultdict(int)
        active: dict[str, int] = defaultdict(int)
        for port, state in self.pg.rows(sql):
            pid, exe = owners.get(int(port or 0), (0, "?"))
            role = self.roles.get(pid, exe)
            count[role] += 1
            active[role] += state == "active"
        for role, n in count.items():
            self.most[role] = max(self.most[role], n)
            self.most_active[role] = max(self.most_active[role], active[role])

    def take(self) -> dict[str, Any]:
        out = {"most": dict(self.most), "most_active": dict(self.most_active)}
        self.most.clear()
        self.most_active.clear()
        return out


_SS = re.compile(r"127\.0\.0\.1:(\d+)\s+127\.0\.0\.1:(\d+)\s+users:\(\(\"([^\"]+)\",pid=(\d+)")


def port_owners(pg_port: int) -> dict[int, tuple[int, str]]:
    """Local port -> (pid, program) of every TCP connection to ``pg_port``."""
    out = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True, check=True).stdout
    owners = {}
    for local, peer, exe, pid in _SS.findall(out):
        if int(peer) == pg_port:
            owners[int(local)] = (int(pid), exe)
    return owners


def snapshot(pg: PrivatePostgres, db: str) -> dict[str, Any]:
    """WAL position, checkpoint counters and per-table statistics (partitions summed)."""
    lsn = pg.rows("SELECT pg_current_wal_lsn()")[0][0]
    timed, req, written = pg.rows(
        "SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter"
    )[0]
    tables = {}
    sql = (
        "SELECT coalesce(pg_partition_root(relid)::text, relname::text), "
        "sum(pg_table_size(relid)), sum(pg_indexes_size(relid)), sum(n_live_tup), "
        "sum(n_dead_tup), sum(autovacuum_count), sum(autoanalyze_count), sum(n_tup_upd), "
        "sum(n_tup_hot_upd) FROM pg_stat_user_tables GROUP BY 1"
    )
    keys = ("table_bytes", "index_bytes", "live", "dead", "autovacuum", "autoanalyze", "upd")
    for name, *values in pg.rows(sql, db):
        tables[name] = dict(zip((*keys, "hot_upd"), (int(v or 0) for v in values), strict=True))
    return {
        "lsn": lsn,
        "checkpoints": {"timed": int(timed), "requested": int(req), "buffers": int(written)},
        "tables": tables,
        "log_bytes": pg.log_path.stat().st_size,
    }


def compare(
    pg: PrivatePostgres, before: dict[str, Any], after: dict[str, Any], n: int
) -> dict[str, Any]:
    wal = int(pg.rows(f"SELECT pg_wal_lsn_diff('{after['lsn']}', '{before['lsn']}')")[0][0])
    log = pg.log_path.read_bytes()[before["log_bytes"] : after["log_bytes"]].decode()
    checkpoints = {k: after["checkpoints"][k] - before["checkpoints"][k] for k in ("timed",
                   "requested", "buffers")}  # fmt: skip
    growth = {}
    for name in HOT:
        a = after["tables"].get(name)
        if a is None:
            continue
        b = before["tables"].get(name, dict.fromkeys(a, 0))
        growth[name] = {
            "table_mb": round(a["table_bytes"] / 2**20, 1),
            "index_mb": round(a["index_bytes"] / 2**20, 1),
            "live": a["live"],
            "dead": a["dead"],
            "autovacuum": a["autovacuum"] - b["autovacuum"],
            "autoanalyze": a["autoanalyze"] - b["autoanalyze"],
            "updates": a["upd"] - b["upd"],
            "hot_updates": a["hot_upd"] - b["hot_upd"],
        }
    return {
        "runs": n,
        "wal_bytes": wal,
        "wal_bytes_per_run": round(wal / n),
        "checkpoints": checkpoints,
        "warnings": log.count(WARNING),
        "checkpoint_reasons": {r: log.count(f"checkpoint starting: {r}") for r in ("time", "wal")},
        "tables": growth,
    }


STALL_S = 120  # seconds without a run ending before drain gives up


def drain(contender: TickworkContender, pg: PrivatePostgres, db: str, total: int) -> None:
    """Wait until ``total`` runs read ``success`` (outcomes are written after the start).

    Gives up only when no run has ended for ``STALL_S`` seconds: on a loaded machine a chunk
    may drain slowly, and that is a rate, not a failure."""
    last, moved = -1, time.monotonic()
    while True:
        done = int(pg.rows("SELECT count(*) FROM runs WHERE state = 'success'", db)[0][0])
        if done >= total:
            return
        if done != last:
            last, moved = done, time.monotonic()
        elif time.monotonic() - moved > STALL_S:
            raise RuntimeError(f"only {done}/{total} runs ended success; none for {STALL_S} s")
        contender._alive()
        time.sleep(2.0)


def one_chunk(contender: TickworkContender, size: int) -> None:
    """``size`` runs through the enqueue API; returns when the workers started them all."""
    mark = contender.records.count()
    contender._produce("w1", size)
    got = contender.records.wait(mark, size, timeout=size, stall=120, check=contender._alive)
    if got < size:
        raise RuntimeError(f"only {got}/{size} runs of a chunk started")


def doctor(contender: TickworkContender) -> list[str]:
    exe = Path(contender.python).with_name("tickwork")
    done = subprocess.run(
        [str(exe), "doctor"], env=contender.env, capture_output=True, text=True, check=False
    )
    keep = ("max_wal_size", "autovacuum", "max_connections", "checkpoint")
    return [line for line in done.stdout.splitlines() if any(k in line for k in keep)]


def table_autovacuum(pg: PrivatePostgres, db: str) -> list[str]:
    """The per-table autovacuum settings of deploy/README.md, on each partition."""
    done = []
    for table, options in AUTOVACUUM.items():
        leaves = pg.rows(
            f"SELECT relid::text FROM pg_partition_tree('{table}') WHERE isleaf "
            f"UNION SELECT '{table}' WHERE NOT EXISTS "
            f"(SELECT 1 FROM pg_partitioned_table WHERE partrelid = '{table}'::regclass)",
            db,
        )
        for (leaf,) in leaves:
            pg.rows(f"ALTER TABLE {leaf} SET ({options})", db)
        done.append(f"{table} ({len(leaves)} tables): {options}")
    return done


def fill(contender: TickworkContender, pg: PrivatePostgres, n: int) -> dict[str, Any]:
    """``n`` pending `at` jobs (job, task, run, run key, task run each) in one SQL
    transaction, as bench/scale.py writes them: the fastest bulk write, WAL-heavy."""
    db = contender.env["PEERBENCH_PG_DB"]
    before, began = snapshot(pg, db), time.monotonic()
    contender._sql(FILL.format(n=n, retry=RETRY))
    seconds = time.monotonic() - began
    result = compare(pg, before, snapshot(pg, db), n)
    result |= {"seconds": round(seconds), "wal_mb_s": round(result["wal_bytes"] / seconds / 2**20)}
    print(json.dumps({"fill": result}), flush=True)
    return result


def measure(
    args: argparse.Namespace, contender: TickworkContender, pg: PrivatePostgres, out_dir: Path
) -> dict[str, Any]:
    """The load, chunk by chunk, with the numbers since its start after each chunk."""
    db = contender.env["PEERBENCH_PG_DB"]
    names = ["scheduler", *(f"worker-{k}" for k in range(args.workers)), "api"]
    roles = {p.popen.pid: n for n, p in zip(names, contender.workers, strict=True)}
    sampler = Sampler(pg, db, roles, args.sample)
    sampler.start()
    before, began, done = snapshot(pg, db), time.monotonic(), 0
    result: dict[str, Any] = {}
    while done < args.runs and time.monotonic() - began < args.max_minutes * 60:
        size = min(args.chunk, args.runs - done)
        one_chunk(contender, size)
        done += size
        drain(contender, pg, db, 20 + done)  # the warm-up's 20 runs too
        seconds = time.monotonic() - began
        result = compare(pg, before, snapshot(pg, db), done)
        result |= {"seconds": round(seconds), "runs_per_s": round(done / seconds, 1)}
        result |= {"load": os.getloadavg()[0], "connections": dict(sampler.most)}
        result["connections_active"] = dict(sampler.most_active)
        result["peak_wal_mb_s"] = sampler.peak_wal_mb_s
        with (out_dir / "chunks.jsonl").open("a") as f:
            f.write(json.dumps(result) + "\n")
        print(json.dumps(result), flush=True)
    sampler.halt.set()
    return result


def run(
    args: argparse.Namespace, out_dir: Path, procs: Procs, pg: PrivatePostgres
) -> dict[str, Any]:
    with redis_server(procs, out_dir) as port:
        services = Services(
            redis_url=f"redis://127.0.0.1:{port}/0",
            pg_host="127.0.0.1",
            pg_port=pg.port,
            pg_user="postgres",
            workers=args.workers,
            out_dir=out_dir,
            venv_root=BENCH / ".venvs",
            procs=procs,
        )
        contender = TickworkContender(SPECS[0], services)
        try:
            contender.start()
            applied: dict[str, Any] = pg.settings | {
                "server_version": pg.rows("SHOW server_version")[0][0]
            }
            if args.advised:
                applied["tables"] = table_autovacuum(pg, contender.env["PEERBENCH_PG_DB"])
            print(json.dumps(applied), flush=True)
            filled = fill(contender, pg, args.fill) if args.fill else {}
            result = measure(args, contender, pg, out_dir) if args.runs else {}
            return result | {"fill": filled, "settings": applied, "doctor": doctor(contender)}
        finally:
            contender.stop()


def main() -> None:
    args = parse_args()
    exit_on_signals()
    out_dir = (BENCH / "results" / f"pg-sizing-{datetime.now():%Y%m%d-%H%M%S}").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    procs = Procs()
    settings = {"log_checkpoints": "on"}
    if args.advised:
        settings |= dict(item.split("=", 1) for item in args.settings.split(",") if item)
    pg = PrivatePostgres(settings)
    pg.start()
    try:
        result = run(args, out_dir, procs, pg)
    finally:
        procs.stop_all()
        pg.stop(keep_log=out_dir / "server.log")
    (out_dir / "pg-sizing.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result["doctor"], indent=1))
    print(f"results in {out_dir}")


if __name__ == "__main__":
    main()
