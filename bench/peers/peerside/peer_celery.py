"""Celery app for the peer benchmark (runs inside bench/.venvs/celery).

Worker: ``celery -A peer_celery worker -P prefork -c 2 --loglevel=WARNING``. Redis broker, no
result backend (``task_ignore_result``), Celery's defaults otherwise (early ack, prefetch x4).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from celery import Celery
from peer_record import record

app = Celery("peer_celery", broker=os.environ.get("PEERBENCH_REDIS_URL", "redis://"))
app.conf.update(
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=True,
)


def _noop(tag: str, i: int) -> None:
    record(tag, i)


noop: Any = app.task(name="noop")(_noop)

BULK = "none: per-job apply_async over one held producer connection"


class Client:
    def __init__(self) -> None:
        self._producer_cm: Any = app.producer_or_acquire()
        self._producer: Any = self._producer_cm.__enter__()

    def submit_bulk(self, tag: str, ids: range) -> None:
        for i in ids:
            noop.apply_async((tag, i), producer=self._producer)

    def submit(self, tag: str, i: int) -> None:
        noop.apply_async((tag, i), producer=self._producer)

    def submit_at(self, tag: str, i: int, due: datetime) -> None:
        noop.apply_async((tag, i), eta=due, producer=self._producer)

    def close(self) -> None:
        self._producer_cm.__exit__(None, None, None)
