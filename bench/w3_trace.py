"""Where W3's lateness goes: per run, due → handed to the broker → timer fired → taken by the
worker → claim stamped (the recorded start), beside what else held the process meanwhile.

Runs `tickwork up` as bench/embedded.py does, but through this file (``--serve``), which
installs probes first: the in-process broker's hand-off, timer and take, the worker's claim,
every transaction on the store's threads (queued, started, ended), event-loop stalls (a 1 ms
ticker late by more than ``--stall-ms``) and garbage collections. The probes write their
events to a file when the server stops; the driver then splits each W3 run's lateness into
segments, and lists what overlapped the late ones.

    .venv/bin/python bench/w3_trace.py [--before w1e,w2] [--rounds 1] [--late-ms 10]

``--before`` runs other bench/embedded.py workloads first (W3's tail came after W1 and W2 in
the same server). Diagnostic only: the probes cost a few µs per event.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import gc
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

Event = tuple[Any, ...]
TYPES_AT = 50_000  # a full collection walking more objects: what they are is recorded


# -- the server side -----------------------------------------------------------------------------
def install_probes(out: Path, stall_ms: float) -> None:
    events: list[Event] = []
    atexit.register(lambda: out.write_text("\n".join(json.dumps(e) for e in events)))
    probe_broker(events.append)
    probe_store(events.append)
    probe_worker(events.append, stall_ms)
    probe_gc(events.append)


def probe_broker(add: Callable[[Event], None]) -> None:
    from tickwork.broker import memory

    broker = memory.MemoryBroker
    publish_at, fire, take = broker.publish_at, broker._fire, broker._take

    async def probed_publish_at(self: Any, items: Any) -> None:
        now = time.time()
        for delivery, at in items:
            add(("handed", delivery.task_run_id, at.timestamp(), now))
        await publish_at(self, items)

    def probed_fire(self: Any, delivery: Any, at: datetime) -> None:
        fire(self, delivery, at)
        if (delivery.task_run_id, delivery.attempt) not in self._delayed:
            add(("fired", delivery.task_run_id, time.time()))

    def probed_take(self: Any, queues: Any, max_items: int) -> Any:
        taken = take(self, queues, max_items)
        now = time.time()
        for d in taken:
            add(("taken", d.task_run_id, now))
        return taken

    broker.publish_at = probed_publish_at  # type: ignore[method-assign]
    broker._fire = probed_fire  # type: ignore[method-assign]
    broker._take = probed_take  # type: ignore[method-assign]


def probe_store(add: Callable[[Event], None]) -> None:
    """Every transaction: its thread kind, queued, started, ended and its result seen."""
    from tickwork.store import transactions

    run = transactions.SqlTransactions._on_thread

    async def probed_run(threads: Any, call: Callable[[], Any]) -> Any:
        queued, seen = time.time(), {}

        def timed() -> Any:
            seen["start"] = time.time()
            try:
                return call()
            finally:
                seen["end"] = time.time()

        try:
            return await run(threads, timed)
        finally:
            name = f"{threads._thread_name_prefix.rsplit('-', 1)[-1]} {_operation(call)}"
            add(("tx", name, queued, seen.get("start", 0), seen.get("end", 0), time.time()))

    transactions.SqlTransactions._on_thread = staticmethod(probed_run)  # type: ignore[method-assign]


def _operation(
    call: Callable[..., Any],
    owners: tuple[str, ...] = ("SqlStore.", "SqlTransactions."),
    limit: int = 20,
) -> str:
    """The store method a transaction runs for (``SqlStore.claim``), from its closures:
    the first function found whose qualified name starts with one of ``owners``."""
    todo, seen = [call], 0
    while todo and seen < limit:
        seen += 1
        f = todo.pop()
        name = getattr(f, "__qualname__", "")
        if name.startswith(owners) and "._run" not in name:
            return name.split(".<locals>")[0].split(".", 1)[1]
        for cell in getattr(f, "__closure__", None) or ():
            with contextlib.suppress(ValueError):
                if callable(cell.cell_contents):
                    todo.append(cell.cell_contents)
    return "?"


def probe_worker(add: Callable[[Event], None], stall_ms: float) -> None:
    """The worker's claims, and a 1 ms ticker on its loop that records stalls."""
    from tickwork.worker import pool

    claim, worker_run = pool.WorkerPool._claim_and_start, pool.WorkerPool.run

    async def probed_claim(self: Any, deliveries: Any) -> None:
        t0 = time.time()
        await claim(self, deliveries)
        add(("claim", [d.task_run_id for d in deliveries], t0, time.time()))

    async def ticker() -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            late = time.perf_counter() - t0 - 0.001
            if late * 1000 > stall_ms:
                add(("stall", time.time() - late, time.time()))

    async def with_ticker(self: Any) -> None:
        tick = asyncio.ensure_future(ticker())
        try:
            await worker_run(self)
        finally:
            tick.cancel()

    pool.WorkerPool._claim_and_start = probed_claim  # type: ignore[method-assign]
    pool.WorkerPool.run = with_ticker  # type: ignore[method-assign]


def _kind(o: object) -> str:
    """A type name; for functions and classes, the module that made them too."""
    if isinstance(o, type) or type(o).__name__ == "function":
        return f"{type(o).__name__} of {getattr(o, '__module__', '?')}"
    return type(o).__qualname__


def probe_gc(add: Callable[[Event], None]) -> None:
    started: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            if info["generation"] == 2:  # how many objects a full collection walks
                walked = gc.get_objects(2) + gc.get_objects(1)
                started["n"] = len(walked)
                if len(walked) > TYPES_AT and started.get("typed", 0) < 20:
                    started["typed"] = started.get("typed", 0) + 1
                    kinds = Counter(_kind(o) for o in walked).most_common(16)
                    add(("gctypes", [*kinds, ("frozen", gc.get_freeze_count())], time.time()))
                del walked
            started["t"] = time.perf_counter()
            return
        took = time.perf_counter() - started.get("t", time.perf_counter())
        if took > 0.001:
            count = started.pop("n", 0) if info["generation"] == 2 else 0
            add(("gc", info["generation"], count, time.time() - took, time.time()))

    gc.callbacks.append(on_gc)


def serve(argv: list[str]) -> None:
    install_probes(Path(os.environ["W3_TRACE_OUT"]), float(os.environ.get("W3_STALL_MS", "3")))
    from tickwork.cli.main import main

    sys.argv = ["tickwork", *argv]
    main()


# -- the driver ----------------------------------------------------------------------------------
def load(path: Path) -> list[Event]:
    return [tuple(json.loads(line)) for line in path.read_text().splitlines() if line]


def w3_runs(db: Path) -> list[tuple[str, float, float]]:
    """(task run id, due, started) of every W3 task run, as Unix times."""
    from embedded import db_rows, parse_ts

    rows = db_rows(
        db,
        "SELECT id, logical_date, started_at FROM task_runs "
        "WHERE job_name LIKE 'w3-%' AND started_at IS NOT NULL",
    )
    return [(i, parse_ts(d).timestamp(), parse_ts(s).timestamp()) for i, d, s in rows]


def segments(events: list[Event], runs: list[tuple[str, float, float]]) -> dict[str, list[float]]:
    at: dict[str, dict[str, float]] = {}
    for e in events:
        if e[0] in ("handed", "fired", "taken"):
            at.setdefault(e[1], {}).setdefault(e[0], e[-1])
    out: dict[str, list[float]] = {k: [] for k in ("late", "fired", "taken", "stamped", "ahead")}
    for task_run_id, due, started in runs:
        t = at.get(task_run_id, {})
        if not {"handed", "fired", "taken"} <= t.keys():
            continue
        out["late"].append((started - due) * 1000)
        out["ahead"].append((due - t["handed"]) * 1000)
        out["fired"].append((t["fired"] - due) * 1000)
        out["taken"].append((t["taken"] - t["fired"]) * 1000)
        out["stamped"].append((started - t["taken"]) * 1000)
    return out


def describe(values: list[float]) -> str:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {statistics.median(values):8.2f}  p99 {q[98]:8.2f}  max {max(values):8.2f} ms"


def overlapping(events: list[Event], due: float, end: float) -> list[str]:
    """What held the process between 200 ms before ``due`` and ``end``, with its start
    relative to ``due`` (ms)."""
    found, start = [], due - 0.2
    for e in events:
        kind = e[0]
        if kind == "tx" and e[4] - e[3] > 0.003 and e[3] < end and e[4] > start:
            found.append(f"tx[{e[1]}] {1000 * (e[4] - e[3]):.1f} ms at {1000 * (e[3] - due):+.0f}")
        elif kind in ("stall", "gc") and e[-2] < end and e[-1] > start:
            what = f"gc{e[1]}" if kind == "gc" else "stall"
            found.append(f"{what} {1000 * (e[-1] - e[-2]):.1f} ms at {1000 * (e[-2] - due):+.0f}")
    return found


def during_w3(events: list[Event]) -> list[Event]:
    """The events from a second before W3's first hand-off on (start-up, W1 and W2 left out)."""
    handed = [e[-1] for e in events if e[0] == "handed"]
    since = min(handed) - 1.0 if handed else 0.0
    return [e for e in events if e[-1] >= since]


def report(events: list[Event], runs: list[tuple[str, float, float]], late_ms: float) -> None:
    whole = Counter(e[1] for e in events if e[0] == "tx")
    print("transactions of the whole run, by operation:", whole.most_common(14))
    events = during_w3(events)
    segs = segments(events, runs)
    print(f"W3 runs traced: {len(segs['late'])} of {len(runs)}")
    for name, what in (
        ("late", "lateness (claim stamp - due)"),
        ("ahead", "handed to the broker before due"),
        ("fired", "timer fired - due"),
        ("taken", "taken by the worker - fired"),
        ("stamped", "claim stamped - taken"),
    ):
        print(f"  {what:<34} {describe(segs[name])}")
    kinds: dict[str, int] = {}
    for e in events:
        kinds[e[0]] = kinds.get(e[0], 0) + 1
    print("  events:", kinds)
    late = sorted((s - d, i, d, s) for i, d, s in runs if (s - d) * 1000 > late_ms)
    print(f"  runs later than {late_ms:g} ms: {len(late)}")
    for lateness, task_run_id, due, started in late[-5:]:
        near = overlapping(events, due, started)
        print(f"    {1000 * lateness:7.1f} ms  {task_run_id}: {'; '.join(near[-12:]) or '-'}")
    stalls = sorted((e[-1] - e[-2] for e in events if e[0] == "stall"), reverse=True)[:5]
    gcs = sorted((e[-1] - e[-2], e[1], e[2]) for e in events if e[0] == "gc")[-5:]
    txs = sorted(((e[4] - e[3]), e[1]) for e in events if e[0] == "tx")[-5:]
    for e in events:
        if e[0] == "gctypes":
            print("  objects in a full collection, by type:", e[1])
    ops = Counter(e[1] for e in events if e[0] == "tx")
    print("  transactions by operation:", ops.most_common(12))
    print("  longest loop stalls (ms):", [round(1000 * s, 1) for s in stalls])
    print(
        "  longest collections (ms, gen, objects in gen 1+2):",
        [(round(1000 * d, 1), g, n) for d, g, n in gcs],
    )
    print("  longest transactions (ms, thread):", [(round(1000 * d, 1), n) for d, n in txs])


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
        return
    import embedded

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="", help="bench/embedded.py workloads run first")
    parser.add_argument("--jobs", type=int, default=5000, help="W1 job count (with --before)")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--late-ms", type=float, default=10.0)
    parser.add_argument("--stall-ms", type=float, default=3.0)
    parser.add_argument("--keep", help="copy the events file here")
    args = parser.parse_args()
    out = Path(f"/tmp/w3-trace-{os.getpid()}.jsonl")
    os.environ["W3_TRACE_OUT"], os.environ["W3_STALL_MS"] = str(out), str(args.stall_ms)
    command = [sys.executable, __file__, "--serve"]
    results: dict[str, Any] = {}
    with embedded.tickwork_up(os.cpu_count() or 2, command=command) as srv:
        for w in [w for w in args.before.split(",") if w]:
            title, run = embedded.WORKLOADS[w]
            results[title] = run(srv, args)
        results["W3"] = embedded.w3_at_lateness(srv, 500)
        runs = w3_runs(srv.db)
    print(json.dumps(results, indent=2))
    events = load(out)
    if args.keep:
        Path(args.keep).write_text(out.read_text())
    out.unlink()
    report(events, runs, args.late_ms)


if __name__ == "__main__":
    main()
