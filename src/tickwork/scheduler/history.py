"""Housekeeping of the run history: ``Store.maintain_partitions`` now and every few minutes.

Run by the HA leader while it leads (``ha.py``) and by ``tickwork up``. It writes without a
fence, on purpose: every step is idempotent, runs under one advisory lock on PostgreSQL, and
re-checks what it drops (only months wholly past the retention, holding no unfinished work)
inside its own transaction. So a paused leader that resumes after losing its lease can do
nothing here that the new leader's maintenance would not do too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tickwork.ports import HistoryStore

log = logging.getLogger("tickwork.scheduler.history")


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    #: Days of run history kept; None keeps everything (nothing is ever dropped).
    retention_days: int | None = None
    #: Monthly partitions created ahead of the current one (PostgreSQL).
    ahead: int = 2
    #: Seconds between two maintenance passes.
    every: float = 300.0

    def __post_init__(self) -> None:
        if self.retention_days is not None and self.retention_days < 1:
            raise ValueError(f"retention_days must be at least 1, not {self.retention_days!r}")
        if not self.every > 0:
            raise ValueError(f"every must be a positive number of seconds, not {self.every!r}")


async def maintain_once(store: HistoryStore, now: datetime, config: HistoryConfig) -> None:
    """One pass; logs what it did. A failure is logged and left to the next pass: the
    history is not needed to schedule (a missing month goes to the DEFAULT partition)."""
    try:
        done = await store.maintain_partitions(
            now, retention_days=config.retention_days, ahead=config.ahead
        )
    except Exception:
        log.exception("run history maintenance failed; trying again in %.0f s", config.every)
        return
    if done.created or done.dropped:
        log.info("run history: created %s; dropped %s", done.created or "-", done.dropped or "-")
    if done.deleted_runs:
        log.info("run history: deleted %d run(s) past the retention", done.deleted_runs)
    if done.deleted_alerts:
        log.info("run history: deleted %d run alert(s) past the retention", done.deleted_alerts)
    for kept in done.kept:
        log.info("run history: kept %s", kept)


async def maintain_history(
    store: HistoryStore, clock: Callable[[], datetime], config: HistoryConfig
) -> None:
    """``maintain_once`` now and every ``config.every`` seconds, until cancelled."""
    while True:
        await maintain_once(store, clock(), config)
        await asyncio.sleep(config.every)
