"""Facts of the database for metrics, ``status`` and ``doctor``: read-only, cheap, indexed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

#: ``due``: scheduled or up for retry, due by now, not queued yet (a pool, a run limit, a
#: paused job or a busy scheduler holds it); ``queued``: claimable, no worker took it yet;
#: ``running``: claimed by a worker.
QueueState = Literal["due", "queued", "running"]


@dataclass(frozen=True, slots=True)
class QueueFact:
    """Task runs of one queue, priority lane and state, and the oldest one's instant (when it
    became due or claimable; None for running ones)."""

    queue: str
    lane: int
    state: QueueState
    count: int
    oldest: datetime | None = None


@dataclass(frozen=True, slots=True)
class StoreFacts:
    """What ``FactsStore.facts`` read in one snapshot."""

    queues: list[QueueFact] = field(default_factory=list)
    dead_letters: int = 0  # task runs whose last attempt failed (capped at DEAD_LETTER_CAP)
    missed_fires: int = 0  # cron fires recorded as missed since the instant asked


#: Counting dead letters stops here: the gauge says "at least this many" beyond it.
DEAD_LETTER_CAP = 100_000


class FactsStore(Protocol):
    """Read-only facts of the database. Each query reads a partial or leading index, so its
    cost follows the backlog (queued, running, due, dead-lettered rows), never the history."""

    async def facts(self, now: datetime, missed_since: datetime) -> StoreFacts:
        """Queue depths by queue, lane and state (``due`` and ``queued`` count only what is
        due or claimable at ``now``), dead letters, and cron fires recorded as missed with a
        logical date at or after ``missed_since``."""

    async def schema_revision(self) -> str | None:
        """The Alembic revision the database is at; None before the first migration."""

    async def server_facts(self) -> dict[str, str]:
        """The database server's clock (``now``, ISO 8601) and, on PostgreSQL, the settings
        ``doctor`` checks (``max_wal_size``, ``autovacuum``, ``max_connections``...)."""
