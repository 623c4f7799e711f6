"""Where a single enqueue's milliseconds go inside the API: per request, the wall time of each
step of ``POST /api/v1/jobs/{name}/runs`` and the event loop's thread CPU meanwhile.

Runs ``bench/api_submit.py``'s single enqueues (one client, one request at a time, as W2's
producer) against a real ``tickwork api`` started through this file (``--serve``), which wraps
the fast path, its body read and token check, the group write, ``Store.enqueue_each``, the
broker's ``publish`` and the answer's two ASGI messages with ``perf_counter`` stamps. The
server writes them to a file when it stops; the driver prints p50 / p90 / p99 per step.

    .venv/bin/python bench/api_trace.py [--runs 2000] [--server-path /tmp/base/src]

Diagnostic only: the probes cost a few µs per request. A baseline's ``src`` (``--server-path``)
must have the same classes (the fast path, ``EnqueueGroups``, ``SqlStore.enqueue_each``).
"""

from __future__ import annotations

import argparse
import atexit
import contextvars
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

Stamps = dict[str, float]
_CURRENT: contextvars.ContextVar[Stamps | None] = contextvars.ContextVar("stamps", default=None)
_DONE: list[Stamps] = []
#: (label, from stamp, to stamp), in the order a request passes them.
STEPS = [
    ("request in -> body read", "in", "read"),
    ("body read -> token checked", "read", "token"),
    ("token -> group write (body, plan)", "token", "group"),
    ("group write -> store call", "group", "store"),
    ("store: insert and commit", "store", "stored"),
    ("stored -> publish", "stored", "publish"),
    ("publish (Redis round trip)", "publish", "published"),
    ("published -> answer started", "published", "answer"),
    ("answer started -> body sent", "answer", "sent"),
    ("whole request in the API", "in", "out"),
    ("loop's thread CPU meanwhile", "cpu_in", "cpu_out"),
]


def _stamp(name: str) -> None:
    stamps = _CURRENT.get()
    if stamps is not None and name not in stamps:
        stamps[name] = time.perf_counter()


def _around(owner: Any, attribute: str, before: str, after: str) -> None:
    """Wrap the coroutine function ``owner.attribute`` with stamps before and after."""
    original: Callable[..., Awaitable[Any]] = getattr(owner, attribute)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        _stamp(before)
        try:
            return await original(*args, **kwargs)
        finally:
            _stamp(after)

    setattr(owner, attribute, wrapped)


def install(out: str) -> None:
    """Wrap the steps of the enqueue in this process; write the stamps to ``out`` at exit."""
    from tickwork.api import fast_path
    from tickwork.app.enqueue_group import EnqueueGroups
    from tickwork.broker.redis import RedisStreamsBroker
    from tickwork.store.sql import SqlStore

    _around(fast_path, "_read", "read_start", "read")
    _around(fast_path.EnqueueFastPath, "_token", "token_start", "token")
    _around(EnqueueGroups, "write", "group", "written")
    _around(SqlStore, "enqueue_each", "store", "stored")
    _around(RedisStreamsBroker, "publish", "publish", "published")
    outer = fast_path.EnqueueFastPath.__call__

    async def call(self: Any, scope: Any, receive: Any, send: Any) -> None:
        stamps: Stamps = {"in": time.perf_counter(), "cpu_in": time.thread_time()}
        token = _CURRENT.set(stamps)

        async def stamped(message: Any) -> None:
            _stamp("answer" if message["type"] == "http.response.start" else "body")
            await send(message)
            if message["type"] == "http.response.body":
                _stamp("sent")

        try:
            await outer(self, scope, receive, stamped)
        finally:
            stamps["out"], stamps["cpu_out"] = time.perf_counter(), time.thread_time()
            _CURRENT.reset(token)
            _DONE.append(stamps)

    fast_path.EnqueueFastPath.__call__ = call  # type: ignore[method-assign]

    def write() -> None:
        with open(out, "w") as f:
            for stamps in _DONE:
                f.write(" ".join(f"{k}={v!r}" for k, v in stamps.items()) + "\n")

    atexit.register(write)


def serve() -> None:
    install(os.environ["TICKWORK_API_TRACE"])
    from tickwork.cli.main import main

    sys.argv = ["tickwork", "api"]
    main()


def report(path: Path) -> None:
    rows = []
    for line in path.read_text().splitlines():
        rows.append({k: float(v) for k, v in (item.split("=") for item in line.split())})
    rows = [r for r in rows if "stored" in r and "sent" in r]
    print(f"{len(rows)} enqueues answered by the fast path; ms p50 / p90 / p99 / mean")
    for label, start, end in STEPS:
        spans = sorted((r[end] - r[start]) * 1e3 for r in rows if start in r and end in r)
        if spans:
            at = [spans[min(len(spans) - 1, int(q * len(spans)))] for q in (0.5, 0.9, 0.99)]
            mean = statistics.mean(spans)
            print(f"  {label:36s} {at[0]:8.3f} {at[1]:8.3f} {at[2]:8.3f} {mean:8.3f}")


def main() -> None:
    from api_submit import add_server_options, measure, serving

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="single enqueues")
    add_server_options(parser)
    args = parser.parse_args()
    args.mode, args.bulk, args.batch = "enqueue", 0, 1
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stamps"
        os.environ["TICKWORK_API_TRACE"] = str(out)  # the server inherits it
        command = [sys.executable, str(Path(__file__).resolve()), "--serve"]
        with serving(args, command) as (url, token, pid):
            measure(args, url, token, pid)
        report(out)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main()
