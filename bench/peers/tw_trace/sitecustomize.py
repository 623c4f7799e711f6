"""Diagnostic probes for W2's path, loaded into every tickwork process of a peers run when
``PEERBENCH_TW_TRACE`` is set (``bench/peers/tickwork.py`` puts this directory on
``PYTHONPATH`` and names each run's trace directory). Each process appends ``event id
wall_time`` lines to ``<dir>/<pid>.tsv``; ``tickwork.hops`` joins them per task run
(``extra.trace_ms``).

Events, in a W2 job's order: ``write`` / ``stored`` (the API's group write began / returned:
committed), ``pub``
/ ``pubbed`` (the API's publish sent / Redis answered), ``readcb`` (the worker's blocking
``XREADGROUP`` reply arrived: its future's done callback), ``read`` (the consume loop decoded
it), ``take`` (delivered by the take script instead), ``consume_in`` / ``consumed`` (the
consume call that returned it began / returned), ``claim`` / ``claimed`` (the claim sent /
returned, committed), ``outcome`` / ``completed`` (the completion sent / returned); and each
garbage collection's pause (``gc<generation>``, its milliseconds in place of the id).
Diagnostic only: the probes cost a few µs per event.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

Stamp = Callable[[str, Iterable[object], "float | None"], None]
now = time.time


def _install(trace_dir: str) -> None:
    import atexit

    out = open(os.path.join(trace_dir, f"{os.getpid()}.tsv"), "a", buffering=1 << 16)  # noqa: SIM115
    atexit.register(out.close)

    def flush() -> None:  # the bench reads the files while the processes still run
        while not out.closed:
            time.sleep(0.5)
            with contextlib.suppress(ValueError):
                out.flush()

    threading.Thread(target=flush, name="trace-flush", daemon=True).start()

    def stamp(event: str, ids: Iterable[object], at: float | None = None) -> None:
        at = now() if at is None else at
        for i in ids:
            out.write(f"{event}\t{i}\t{at:.6f}\n")

    _gc_probe(out.write)
    _api_probes(stamp)
    _broker_probes(stamp)
    _pool_probes(stamp)


def _gc_probe(write: Callable[[str], object]) -> None:
    import gc

    began = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = now()
        else:
            at = now()
            write(f"gc{info['generation']}\t{(at - began[0]) * 1e3:.3f}\t{at:.6f}\n")

    gc.callbacks.append(on_gc)


def _api_probes(stamp: Stamp) -> None:
    from tickwork.app.enqueue_group import EnqueueGroups

    stored_at: dict[int, float] = {}
    write, published = EnqueueGroups._write, EnqueueGroups._published

    async def _write(self: Any, group: Any) -> Any:
        began = now()
        for entry, _ in group:
            stamp("write", [d.task_run_id for d in self._deliveries(entry)], began)
        result = await write(self, group)
        for entry, _ in group:
            stored_at[id(entry)] = now()
        return result

    async def _published(self: Any, group: Any, outcomes: Any) -> Any:
        for entry, _ in group:
            if (at := stored_at.pop(id(entry), None)) is not None:
                stamp("stored", [d.task_run_id for d in self._deliveries(entry)], at)
        return await published(self, group, outcomes)

    EnqueueGroups._write = _write  # type: ignore[method-assign]
    EnqueueGroups._published = _published  # type: ignore[method-assign]


def _broker_probes(stamp: Stamp) -> None:
    from tickwork.broker.redis import RedisStreamsBroker as Broker

    publish, watch, read, step, consume = (
        Broker.publish, Broker._watch_streams, Broker._read_by_group, Broker._step,
        Broker.consume,
    )  # fmt: skip
    cb_at: dict[int, float] = {}

    async def _publish(self: Any, deliveries: Any) -> None:
        ids = [d.task_run_id for d in deliveries]
        stamp("pub", ids, None)
        try:
            await publish(self, deliveries)
        finally:
            stamp("pubbed", ids, None)

    async def _watch(self: Any, layout: Any, max_items: int) -> Any:
        group = await watch(self, layout, max_items)
        if id(group.task) not in cb_at:
            cb_at[id(group.task)] = 0.0
            group.task.add_done_callback(lambda t: cb_at.__setitem__(id(t), now()))
        return group

    async def _read(self: Any, group: Any) -> Any:
        got = await read(self, group)
        ids = [d.task_run_id for d in got]
        stamp("read", ids, None)
        if at := cb_at.pop(id(group.task), 0.0):
            stamp("readcb", ids, at)
        return got

    async def _step(self: Any, layout: Any, max_items: int) -> Any:
        found = await step(self, layout, max_items)
        stamp("take", [d.task_run_id for d in found.deliveries], None)
        return found

    async def _consume(self: Any, queues: Any, max_items: int, timeout: float) -> Any:
        began = now()
        got = await consume(self, queues, max_items, timeout)
        ids = [d.task_run_id for d in got]
        stamp("consume_in", ids, began)
        stamp("consumed", ids, None)
        return got

    Broker.publish, Broker._watch_streams, Broker._read_by_group = _publish, _watch, _read  # type: ignore[method-assign]
    Broker._step, Broker.consume = _step, _consume  # type: ignore[method-assign]


def _pool_probes(stamp: Stamp) -> None:
    from tickwork.worker.pool import WorkerPool

    init = WorkerPool.__init__

    def __init__(self: Any, store: Any, *args: Any, **kwargs: Any) -> None:
        init(self, store, *args, **kwargs)
        claim, complete = store.claim, store.complete

        async def claim_traced(keys: Any, *a: Any, **k: Any) -> Any:
            ids = [key[0] for key in keys]
            stamp("claim", ids, None)
            got = await claim(keys, *a, **k)
            stamp("claimed", ids, None)
            return got

        async def complete_traced(outcomes: Any, *a: Any, **k: Any) -> Any:
            ids = [o.task_run_id for o in outcomes]
            stamp("outcome", ids, None)
            got = await complete(outcomes, *a, **k)
            stamp("completed", ids, None)
            return got

        self._store = _Proxy(store, claim=claim_traced, complete=complete_traced)

    WorkerPool.__init__ = __init__  # type: ignore[method-assign]


class _Proxy:
    def __init__(self, target: object, **over: object) -> None:
        self.__dict__.update(over)
        self._target = target

    def __getattr__(self, name: str) -> object:
        return getattr(self._target, name)


_DIR = os.environ.get("PEERBENCH_TW_TRACE")
if _DIR and os.path.basename(sys.argv[0] if sys.argv else "") == "tickwork":
    with contextlib.suppress(ImportError):  # not a tickwork of ours
        _install(_DIR)
