"""Scale: does the cost of an idle scheduler, and of starting work, stay flat as pending work grows?

For each level of pending work (``--pending 0,100000,1000000``): tickwork's distributed mode as
in bench/peers (a fresh PostgreSQL database, a private Redis, 1 scheduler, ``--workers`` workers
x 8, 1 API, started with the CLI), then that many pending `at` jobs due in two days written
straight into the database (one job, run and task run each, as the API would have made them),
then:

  idle   CPU seconds per minute of the scheduler process and of the PostgreSQL backends
         serving the database, over ``--idle`` seconds with nothing due;
  W2     start latency at a steady rate (``--w2-rate`` jobs/s for ``--w2-seconds``), p50/p99,
         from the peers' ledger (worker start - enqueue).

Usage: .venv/bin/python bench/scale.py [--pending 0,100000] [--idle 60] [--w2-rate 200]
       [--w2-seconds 10] [--workers 2]

The target (issue 17): the idle CPU stays near the empty database's, and W2 p99 within 1.5x.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers.contender import Services
from peers.infra import Procs, exit_on_signals, redis_server
from peers.tickwork import SPECS, TickworkContender

BENCH = Path(__file__).resolve().parent

#: N pending `at` jobs due in two days, each with its run, key and task run; ids made in the
#: past few hours, in the current month's partition. Then the statistics, as autovacuum would.
FILL = """
BEGIN;
CREATE TEMP TABLE p AS
SELECT i, lpad(to_hex(ms0 + i), 12, '0') || lpad(to_hex(i), 20, '0') AS tr,
       lpad(to_hex(ms0 + i), 12, '0') || lpad(to_hex(i), 20, '1') AS run,
       lpad(to_hex(ms0 + i), 12, '0') || lpad(to_hex(i), 20, '2') AS job,
       now() + interval '2 days' + i * interval '1 ms' AS due
FROM generate_series(1, {n}) AS i,
     (SELECT (extract(epoch FROM now()) * 1000)::bigint - {n} - 60000 AS ms0) AS m;
INSERT INTO jobs (id, name, schedule_kind, "at", timezone, catchup, paused, queue, priority,
                  retry, tags, metadata, created_at, updated_at)
SELECT job, 'pending-' || i, 'at', due, 'UTC', false, false, 'default', 0, '{retry}', '[]',
       '{{}}', now(), now() FROM p;
INSERT INTO tasks (job_id, name, kind, config, upstream, position, trigger_rule, priority,
                   pool_slots)
SELECT job, 'main', 'shell', '{{"argv": ["true"]}}', '[]', 0, 'all_success', 0, 1 FROM p;
INSERT INTO runs (id, job_id, job_name, logical_date, state, trigger, created_at)
SELECT run, job, 'pending-' || i, due, 'scheduled', 'schedule', now() FROM p;
INSERT INTO run_keys (job_id, logical_date, run_id) SELECT job, due, run FROM p;
INSERT INTO task_runs (id, run_id, job_id, job_name, task_name, kind, config, state, attempt,
                       retry, due_at, logical_date, queue, priority, upstream, cancel_requested)
SELECT tr, run, job, 'pending-' || i, 'main', 'shell', '{{"argv": ["true"]}}', 'scheduled', 1,
       '{retry}', due, due, 'default', 0, '[]', false FROM p;
COMMIT;
ANALYZE jobs; ANALYZE tasks; ANALYZE runs; ANALYZE run_keys; ANALYZE task_runs;
"""
RETRY = (
    '{"max_attempts": 1, "initial_delay": 1.0, "multiplier": 2.0, "max_delay": 300.0, '
    '"jitter": true}'
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--pending", default="0,100000,1000000", help="comma-separated levels")
    p.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU measured")
    p.add_argument("--w2-rate", type=float, default=200.0)
    p.add_argument("--w2-seconds", type=float, default=10.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--pg-host", default="127.0.0.1")
    p.add_argument("--pg-port", type=int, default=5432)
    p.add_argument("--pg-user", default="postgres")
    return p.parse_args()


def one_level(services: Services, n: int, args: argparse.Namespace) -> dict[str, Any]:
    contender = TickworkContender(SPECS[0], services)
    try:
        contender.start()
        began = time.monotonic()
        if n:
            contender._sql(FILL.format(n=n, retry=RETRY))
        filled_s = time.monotonic() - began
        time.sleep(5)  # the scheduler's first passes over the new rows
        vacuums_before = _vacuums(contender)
        before, after = _idle_cpu(contender, args.idle)
        vacuums = _vacuums(contender) - vacuums_before
        per_minute = 60.0 / args.idle
        spent = {k: (after[k] - before.get(k, 0.0)) * per_minute for k in after}
        scheduler = spent.get("scheduler", 0.0)
        postgres = sum(v for k, v in spent.items() if k.startswith("pg-"))
        autovacuum = sum(v for k, v in spent.items() if k.endswith("-autovacuum"))
        w2 = contender.w2(args.w2_rate, args.w2_seconds)
        return {
            "pending": n,
            "fill_s": round(filled_s, 1),
            "idle_cpu_s_per_min": {
                "scheduler": round(scheduler, 3),
                "postgres": round(postgres, 3),
                "of_which_autovacuum": round(autovacuum, 3),
            },
            "autovacuum_runs_while_idle": vacuums,
            "w2_ms": {"p50": w2.p50_ms, "p99": w2.p99_ms, "n": w2.n},
        }
    finally:
        contender.stop()


def _vacuums(contender: TickworkContender) -> int:
    """Autovacuum and autoanalyze passes so far over the contender's tables."""
    rows = contender._sql(
        "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_user_tables"
    )
    return int(rows[0][0])


def _idle_cpu(
    contender: TickworkContender, seconds: float
) -> tuple[dict[str, float], dict[str, float]]:
    """CPU so far per process at the start and at the end of ``seconds`` of idling; sampled
    each second between, so an autovacuum worker that comes and goes inside the window counts
    (its last sample stands for it)."""
    before = contender._cpu()
    after = dict(before)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        after |= contender._cpu()
    return before, after


def main() -> None:
    args = parse_args()
    exit_on_signals()
    out_dir = (BENCH / "results" / f"scale-{datetime.now():%Y%m%d-%H%M%S}").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    procs = Procs()
    results = []
    try:
        with redis_server(procs, out_dir) as port:
            for n in (int(level) for level in args.pending.split(",")):
                services = Services(
                    redis_url=f"redis://127.0.0.1:{port}/0",
                    pg_host=args.pg_host,
                    pg_port=args.pg_port,
                    pg_user=args.pg_user,
                    workers=args.workers,
                    out_dir=out_dir / f"pending-{n}",
                    venv_root=BENCH / ".venvs",
                    procs=procs,
                )
                result = one_level(services, n, args)
                print(json.dumps(result), flush=True)
                results.append(result)
    finally:
        procs.stop_all()
    (out_dir / "scale.json").write_text(json.dumps(results, indent=2))
    base = results[0]
    print(
        "\n| pending | scheduler CPU s/min | PostgreSQL CPU s/min (autovacuum) "
        "| autovacuum runs | W2 p50 ms | W2 p99 ms |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        idle, w2 = r["idle_cpu_s_per_min"], r["w2_ms"]
        ratio = w2["p99"] / base["w2_ms"]["p99"] if base["w2_ms"]["p99"] else float("nan")
        print(
            f"| {r['pending']:,} | {idle['scheduler']} | {idle['postgres']} "
            f"({idle['of_which_autovacuum']}) | {r['autovacuum_runs_while_idle']} | {w2['p50']} "
            f"| {w2['p99']} ({ratio:.2f}x) |"
        )


if __name__ == "__main__":
    main()
