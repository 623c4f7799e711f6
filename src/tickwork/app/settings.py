"""Settings for the processes tickwork runs. Only the wiring and CLI layers read these."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True, slots=True)
class EmbeddedSettings:
    """`tickwork up`: scheduler, worker pool and HTTP API in one process."""

    data_dir: Path = Path(".tickwork")
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = os.cpu_count() or 2
    database_url: str | None = None  # default: SQLite file in data_dir
    queues: tuple[str, ...] = ("default",)
    #: Networks http tasks may reach although private (``TICKWORK_HTTP_ALLOW``, CIDRs).
    http_allow: str = ""
    #: Seconds an ``Idempotency-Key`` is remembered.
    idempotency_ttl: float = 24 * 3600.0
    #: Days of finished runs kept (``TICKWORK_RETENTION_DAYS``); None keeps everything.
    retention_days: int | None = None

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'tickwork.db').resolve()}"
