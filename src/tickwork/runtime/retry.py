"""Retrying store writes through a database outage (a restart, a network blip).

Workers keep what they must write (claims, heartbeats, outcomes, logs) and try again with a
capped backoff until the database answers, instead of crashing and losing finished work. Only
``StoreUnavailable`` is retried: the store raises it when a transaction did not commit because
the connection failed; any other error is a bug and propagates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tickwork.core.errors import StoreUnavailable

T = TypeVar("T")
log = logging.getLogger("tickwork.store")

FIRST_DELAY = 0.05
MAX_DELAY = 2.0


async def through_outages(what: str, attempt: Callable[[], Awaitable[T]]) -> T:
    """``await attempt()``, retried while the store is unavailable (until cancelled)."""
    delay = FIRST_DELAY
    failures = 0
    while True:
        try:
            result = await attempt()
        except StoreUnavailable as exc:
            failures += 1
            if failures == 1:
                log.warning("%s: %s; retrying until the database is back", what, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_DELAY)
            continue
        if failures:
            log.warning("%s: database back after %d failed attempt(s)", what, failures)
        return result
