"""CPU the metrics cost per job, measured on the instrumentation itself.

W1's CPU per job is a few hundred microseconds; what the observability wrappers add per job
is the work of ``ObservedStore`` (timing each store call, observing the start delay at the
claim and the outcome and duration at the completion), ``ObservedBroker`` and
``ObservedRunner`` (binding the attempt's log context). This drives those wrappers over a
store that answers at once (a real implementation of the few methods W1's hot path calls),
in the batch sizes W1 uses, and reports CPU microseconds per job with and without them. On a
loaded machine this is steadier than an end-to-end A/B of W1, whose noise is larger than the
effect.

With ``--tracing``, a third measurement: the same with OpenTelemetry tracing on (a claim
and an attempt span per job, handed to an exporter that drops them), what tracing adds.

Usage: .venv/bin/python bench/metrics_cost.py [--jobs 20000] [--batch 100] [--rounds 5]
       [--tracing]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.core.model import Outcome, RunTrigger, TaskRun, TaskRunState
from tickwork.core.runs import new_run
from tickwork.ids import new_id
from tickwork.observe import tracing
from tickwork.observe.runner import ObservedRunner
from tickwork.observe.store import observed_broker, observed_store
from tickwork.ports import Completion, Delivery, LogSink, RunResult


class InstantStore:
    """The store calls of W1's hot path, answered from memory at once."""

    def __init__(self, claimed: list[TaskRun]) -> None:
        self.claimed = claimed

    async def claim(self, keys: Any, worker_id: str, now: datetime) -> list[TaskRun]:
        return self.claimed

    async def complete(self, outcomes: list[Outcome], *, fence: Any = None) -> Completion:
        return Completion(applied=[o.task_run_id for o in outcomes])

    async def heartbeat(self, keys: Any, worker_id: str, now: datetime) -> set[str]:
        return set()

    async def append_logs(self, chunks: Any) -> None:
        return None


class InstantBroker:
    async def ack(self, deliveries: Any) -> None:
        return None

    async def publish(self, deliveries: Any) -> None:
        return None


class Noop:
    async def run(self, task_run: TaskRun, log: LogSink, cancel: asyncio.Event) -> RunResult:
        return RunResult(ok=True)


class Sink:
    def write(self, stream: str, data: str) -> None:
        return None


def task_runs(n: int) -> list[TaskRun]:
    from tests.helpers import make_job, python_task

    t = datetime.now(UTC)
    job = make_job("bench", now=t, task=python_task())
    return [
        new_run(job, t + timedelta(microseconds=i), trigger=RunTrigger.MANUAL, now=t,
                make_id=new_id, state=TaskRunState.QUEUED).task_runs[0]
        for i in range(n)
    ]  # fmt: skip


async def hot_path(store: Any, broker: Any, runner: Any, batch: list[TaskRun]) -> None:
    """What W1 does per batch: claim, run each, append logs, complete, ack."""
    now = datetime.now(UTC)
    keys = [(tr.id, tr.attempt) for tr in batch]
    claimed = await store.claim(keys, "w", now)
    cancel, sink = asyncio.Event(), Sink()
    for tr in claimed:
        await runner.run(tr, sink, cancel)
    await store.heartbeat(keys, "w", now)
    await store.append_logs([])
    outcomes = [
        Outcome(tr.id, 1, TaskRunState.SUCCESS, finished_at=now, started_at=now) for tr in claimed
    ]
    await store.complete(outcomes)
    await broker.ack([Delivery(tr.id, 1, tr.queue, 0) for tr in claimed])


async def measure(observed: bool, jobs: int, batch: int) -> float:
    runs = task_runs(batch)
    store: Any = InstantStore(runs)
    broker: Any = InstantBroker()
    runner: Any = Noop()
    if observed:
        store, broker, runner = (
            observed_store(store),
            observed_broker(broker),
            ObservedRunner(runner),
        )
    start = time.process_time()
    for _ in range(jobs // batch):
        await hot_path(store, broker, runner, runs)
    return (time.process_time() - start) / jobs * 1e6


async def measure_traced(jobs: int, batch: int) -> float:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracing.configure("bench", env={}, exporter=Drop())
    try:
        return await measure(True, jobs, batch)
    finally:
        tracing.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tracing", action="store_true")
    args = parser.parse_args()
    on: list[float] = []
    off: list[float] = []
    traced: list[float] = []
    for _ in range(args.rounds):  # alternating, so drift in the machine's load hits both
        off.append(asyncio.run(measure(False, args.jobs, args.batch)))
        on.append(asyncio.run(measure(True, args.jobs, args.batch)))
        if args.tracing:
            traced.append(asyncio.run(measure_traced(args.jobs, args.batch)))
    added = statistics.median(on) - statistics.median(off)
    print(f"hot path without metrics: {statistics.median(off):.1f} us CPU per job (median)")
    print(f"hot path with metrics:    {statistics.median(on):.1f} us CPU per job (median)")
    print(f"metrics add:              {added:.1f} us CPU per job")
    if traced:
        more = statistics.median(traced) - statistics.median(on)
        print(f"with metrics and tracing: {statistics.median(traced):.1f} us CPU per job")
        print(f"tracing adds:             {more:.1f} us CPU per job")


if __name__ == "__main__":
    main()
