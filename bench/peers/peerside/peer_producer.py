"""The producer side of the peer benchmark; runs inside a peer's virtual environment.

``python peer_producer.py PEER COMMAND [ARGS]`` imports ``peer_<PEER>`` (its app, no-op task
and ``Client``), does one thing and prints one JSON object on stdout:

  setup                prepare the peer's storage (Procrastinate: apply the schema)
  warm N               submit N jobs tagged "wu" (the harness waits for them to start)
  w1 N                 submit N jobs tagged "w1" through the peer's bulk API where it has one
  w2 RATE SECONDS      submit RATE jobs/s for SECONDS, paced: job i at start + i / RATE, by
                       one of ``PEERBENCH_W2_LANES`` threads (default 1), each with its own
                       ``Client``; with one, a call slower than 1 / RATE lowers the rate offered
  w3 N SEED            N jobs due at distinct instants 5-15 s ahead, enqueued in shuffled order
                       (``Client.submit_at_many`` where the peer has it, else one at a time);
                       counts the jobs whose submit returned after their due instant

All timestamps are ``time.time_ns()`` on this machine, like the workers' records.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime.fromtimestamp(0, UTC)


def w1(mod: Any, client: Any, n: int) -> dict[str, Any]:
    first = time.time_ns()
    client.submit_bulk("w1", range(n))
    return {"first_submit_ns": first, "last_submit_ns": time.time_ns(), "bulk": mod.BULK}


def w2(mod: Any, client: Any, rate: float, seconds: float) -> dict[str, Any]:
    n = int(rate * seconds)
    lanes = max(1, int(os.environ.get("PEERBENCH_W2_LANES", "1")))
    clients = [client] + [mod.Client() for _ in range(lanes - 1)]
    enqueued, returned = [0] * n, [0] * n

    def lane(k: int) -> None:
        for i in range(k, n, lanes):
            pause = start + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            enqueued[i] = time.time_ns()
            clients[k].submit("w2", i)
            returned[i] = time.time_ns()

    start = time.monotonic()
    try:
        if lanes == 1:
            lane(0)
        else:
            with ThreadPoolExecutor(lanes) as pool:
                list(pool.map(lane, range(lanes)))
    finally:
        for other in clients[1:]:
            other.close()
    return {
        "enqueue_ns": enqueued,
        "returned_ns": returned,
        "submit_s": time.monotonic() - start,
        "lanes": lanes,
    }


def w3(client: Any, n: int, seed: int) -> dict[str, Any]:
    started = time.time_ns()
    base_ms = started // 1_000_000 + 5_000
    step_us = 10_000_000 // n
    due_us = [base_ms * 1000 + i * step_us for i in range(n)]
    order = list(range(n))
    random.Random(seed).shuffle(order)
    jobs = [(i, EPOCH + timedelta(microseconds=due_us[i])) for i in order]
    many = getattr(client, "submit_at_many", None)
    if many is not None:  # the peer's own way to submit many delayed jobs
        submitted: list[int] = many("w3", jobs)
    else:
        submitted = []
        for i, due in jobs:
            client.submit_at("w3", i, due)
            submitted.append(time.time_ns())
    late = sum(1 for (i, _), ns in zip(jobs, submitted, strict=True) if ns > due_us[i] * 1000)
    return {
        "due_ns": [d * 1000 for d in due_us],
        "started_ns": started,
        "enqueued_ns": max(submitted),
        "submitted_after_due": late,
    }


def main(argv: list[str]) -> None:
    peer, command, args = argv[0], argv[1], argv[2:]
    mod = importlib.import_module(f"peer_{peer}")
    if command == "setup":
        getattr(mod, "setup", lambda: None)()
        print(json.dumps({}))
        return
    client = mod.Client()
    try:
        if command == "warm":
            client.submit_bulk("wu", range(int(args[0])))
            out: dict[str, Any] = {}
        elif command == "w1":
            out = w1(mod, client, int(args[0]))
        elif command == "w2":
            out = w2(mod, client, float(args[0]), float(args[1]))
        elif command == "w3":
            out = w3(client, int(args[0]), int(args[1]))
        else:
            raise SystemExit(f"unknown command {command!r}")
    finally:
        client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
