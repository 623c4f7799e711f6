"""Huey app for the peer benchmark (runs inside bench/.venvs/huey).

Worker: ``huey_consumer peer_huey.huey -k process -w 2 -q``. RedisHuey with blocking BRPOP
dequeue (the default), results off (nothing to store for a no-op).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from huey import RedisHuey
from peer_record import record

huey = RedisHuey("peerbench", url=os.environ.get("PEERBENCH_REDIS_URL"), results=False)


def _noop(tag: str, i: int) -> None:
    record(tag, i)


noop: Any = huey.task(name="noop")(_noop)

BULK = "none: per-job call (one LPUSH each)"


class Client:
    def submit_bulk(self, tag: str, ids: range) -> None:
        for i in ids:
            noop(tag, i)

    def submit(self, tag: str, i: int) -> None:
        noop(tag, i)

    def submit_at(self, tag: str, i: int, due: datetime) -> None:
        noop.schedule(args=(tag, i), eta=due)  # aware UTC datetime

    def close(self) -> None:
        pass
