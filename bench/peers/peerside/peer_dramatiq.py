"""Dramatiq actor for the peer benchmark (runs inside bench/.venvs/dramatiq).

Worker: ``dramatiq peer_dramatiq -p 2 -t 8``. Redis broker, default middleware; delayed
messages go through the queue's delay queue (``default.DQ``), which the workers consume too.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from peer_record import record

broker: Any = RedisBroker(url=os.environ.get("PEERBENCH_REDIS_URL", "redis://"))
dramatiq.set_broker(broker)


def _noop(tag: str, i: int) -> None:
    record(tag, i)


noop: Any = dramatiq.actor(actor_name="noop", max_retries=0)(_noop)

BULK = "none: per-job send (one enqueue script call each)"


class Client:
    def submit_bulk(self, tag: str, ids: range) -> None:
        for i in ids:
            noop.send(tag, i)

    def submit(self, tag: str, i: int) -> None:
        noop.send(tag, i)

    def submit_at(self, tag: str, i: int, due: datetime) -> None:
        delay_ms = max(0, round(due.timestamp() * 1000 - time.time() * 1000))
        noop.send_with_options(args=(tag, i), delay=delay_ms)

    def close(self) -> None:
        broker.close()
