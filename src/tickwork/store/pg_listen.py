"""The leader's ear for ``NOTIFY tickwork_enqueue``: a run committed through ``tickwork.outbox``
wakes the scheduler at once instead of waiting for its next poll.

``EnqueueListener.run(wake)`` holds one autocommit psycopg connection that ``LISTEN`` s on the
channel and calls ``wake`` for every notification. It is only an accelerator: the scheduler's
poll (``max_sleep``) still finds every due run, so nothing here may fail the scheduler. When the
connection fails (the server restarted, a proxy cut it), the listener logs it, waits (doubling
from ``retry_after`` up to ``retry_cap`` seconds) and connects again, and in between the poll is
all there is. Right after each (re)connection it calls ``wake`` once, for anything committed
while nobody listened. An idle connection is pinged every ``ping_every`` seconds, so a
connection cut without a word (no FIN: a dropped network path) is noticed and replaced too.

Only the leader should listen: the scheduler starts the listener inside its own run, which the
HA wrapper runs only while it holds the lease (``scheduler/loop.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import psycopg

log = logging.getLogger("tickwork.scheduler.listen")

#: The channel ``tickwork.outbox`` notifies (delivered by PostgreSQL only on commit).
CHANNEL = "tickwork_enqueue"
CONNECT_TIMEOUT_S = 5


class EnqueueListener:
    """LISTEN on ``channel`` over ``conninfo``; counts what it saw, for probes and tests."""

    def __init__(
        self,
        conninfo: str,
        *,
        channel: str = CHANNEL,
        retry_after: float = 0.5,
        retry_cap: float = 30.0,
        ping_every: float = 30.0,
    ) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._retry_after = retry_after
        self._retry_cap = retry_cap
        self._ping_every = ping_every
        self.connected = False  # LISTENing right now
        self.connections = 0  # how many times it has started LISTENing
        self.notifications = 0
        self.backend_pid: int | None = None  # the server process of the current connection

    async def run(self, wake: Callable[[], None]) -> None:
        """Listen until cancelled, reconnecting after failures; never raises otherwise."""
        delay = self._retry_after
        while True:
            before = self.connections
            try:
                await self._listen(wake)
            except (psycopg.Error, OSError, TimeoutError) as exc:
                if self.connections > before:  # it had listened: start the backoff again
                    delay = self._retry_after
                log.warning(
                    "not listening for enqueues (%s); polling, listening again in %g s",
                    str(exc).strip() or type(exc).__name__,
                    delay,
                )
            finally:
                self.connected = False
                self.backend_pid = None
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry_cap)

    async def _listen(self, wake: Callable[[], None]) -> None:
        conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )
        async with conn:
            await conn.execute(f'LISTEN "{self._channel}"')
            self.connected, self.backend_pid = True, conn.info.backend_pid
            self.connections += 1
            log.info("listening for enqueues on %s", self._channel)
            wake()  # whatever was committed while nobody listened
            while True:
                async for _ in conn.notifies(timeout=self._ping_every):
                    self.notifications += 1
                    wake()
                async with asyncio.timeout(CONNECT_TIMEOUT_S):  # idle: is it still there?
                    await conn.execute("SELECT 1")
