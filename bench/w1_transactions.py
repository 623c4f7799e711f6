"""The SQLite writer's transactions in W1: per job, how many of each store operation, with
how many rows per call, and the CPU each kind took (inline on the loop's thread or on the
writer thread).

    .venv/bin/python bench/w1_transactions.py [--jobs 5000]

Runs `tickwork up` through this file (``--serve``), as bench/w3_trace.py does, with probes
around the store's calls and ``HeldConnection.run`` / ``run_now`` (CPU by
``time.thread_time``); the counts are written when the server stops. Diagnostic only.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import w3_trace  # bench/, on the path above

OPERATIONS = ("claim", "start", "complete", "heartbeat", "enqueue_runs", "append_logs")


def install(out: Path) -> None:
    from tickwork.store import engine, sql

    calls, rows = Counter[str](), Counter[str]()
    cpu: dict[str, float] = {}
    atexit.register(lambda: out.write_text(json.dumps({"calls": calls, "rows": rows, "cpu": cpu})))
    for name in OPERATIONS:
        setattr(sql.SqlStore, name, _counted(getattr(sql.SqlStore, name), name, calls, rows))
    run, run_now = engine.HeldConnection.run, engine.HeldConnection.run_now

    def probed_run(self: Any, work: Callable[..., Any]) -> Any:
        start, kind = time.thread_time(), f"writer thread: {_operation(work)}"
        try:
            return run(self, work)
        finally:
            calls[kind] += 1
            cpu[kind] = cpu.get(kind, 0.0) + time.thread_time() - start

    def probed_run_now(self: Any, work: Callable[..., Any], quiet: float = 0.0) -> Any:
        start = time.thread_time()
        result = run_now(self, work, quiet)  # WriterBusy before any work: not counted
        kind = f"inline: {_operation(work)}"
        calls[kind] += 1
        cpu[kind] = cpu.get(kind, 0.0) + time.thread_time() - start
        return result

    engine.HeldConnection.run = probed_run  # type: ignore[method-assign]
    engine.HeldConnection.run_now = probed_run_now  # type: ignore[method-assign]


def _counted(method: Any, name: str, calls: Counter[str], rows: Counter[str]) -> Any:
    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        with contextlib.suppress(TypeError, IndexError):
            rows[name] += len(args[0])
        return await method(self, *args, **kwargs)

    return counted


def _operation(call: Callable[..., Any]) -> str:
    """The ``SqlStore`` method a transaction runs for, from its closures."""
    return w3_trace._operation(call, ("SqlStore.",), limit=30)


def serve(argv: list[str]) -> None:
    install(Path(os.environ["W1_TRANSACTIONS_OUT"]))
    from tickwork.cli.main import main

    sys.argv = ["tickwork", *argv]
    main()


def main() -> None:
    import embedded

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    n, out = args.jobs, Path(f"/tmp/w1_transactions_{os.getpid()}.json")
    os.environ["W1_TRANSACTIONS_OUT"] = str(out)
    command = [sys.executable, __file__, "--serve"]
    with embedded.tickwork_up(os.cpu_count() or 2, command=command) as srv:
        result = embedded.w1_enqueue(srv, n, "w1e-")
    counts = json.loads(out.read_text())
    out.unlink()
    print(json.dumps({k: result[k] for k in ("jobs_per_s", "up_process_cpu_us_per_job")}))
    for name, count in sorted(counts["calls"].items()):
        per_call = counts["rows"].get(name, 0) / count
        spent = counts["cpu"].get(name, 0.0) / n * 1e6
        print(
            f"  {name:<32} {count / n:6.3f} per job  {per_call:6.1f} rows/call  {spent:6.1f} µs/job"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
    else:
        main()
