"""Live updates: one shared server-side poll per watched thing, fanned out to every browser.

A ``Hub`` holds one ``Feed`` per key (``"site"``, ``("run", id)``, ``("log", task_run_id)``)
while at least one browser listens to it. A feed calls its probe once per interval and
publishes only what changed, so fifty tabs on one run cost one query a second, a key nobody
watches costs nothing, and a page where nothing changes costs one cheap probe a second. Each
subscriber has a bounded queue; one that falls behind is told to ``reset`` (reload) instead
of holding memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("tickwork.dashboard")

#: Seconds between probes of a watched key.
POLL_INTERVAL = 1.0
QUEUE_SIZE = 64

#: A probe gets the state it kept last time (the feed's ``initial`` at first) and returns the
#: state to keep and the data of the event to publish (None: nothing to tell).
Probe = Callable[[Any], Awaitable[tuple[Any, Any]]]


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    data: Any


RESET = Event("reset", None)
#: The server is stopping: streams end, so that shutdown does not wait for browsers.
CLOSE = Event("close", None)


@dataclass
class _Feed:
    probe: Probe
    kind: str
    subscribers: set[asyncio.Queue[Event]] = field(default_factory=set)
    last: Any = None
    task: asyncio.Task[None] | None = None


class Hub:
    """Shared polls, keyed; see the module docstring."""

    def __init__(self, interval: float = POLL_INTERVAL) -> None:
        self._interval = interval
        self._feeds: dict[Hashable, _Feed] = {}
        self._closed = False

    def watching(self) -> int:
        """How many keys are polled now (for tests and the bench)."""
        return len(self._feeds)

    @contextlib.asynccontextmanager
    async def subscribe(
        self, key: Hashable, kind: str, probe: Probe, initial: Any = None
    ) -> AsyncIterator[asyncio.Queue[Event]]:
        """A queue of the key's events while the block runs. ``initial`` seeds a new feed's
        last value (what the page was rendered from), so the first change is not missed."""
        if self._closed:
            closed: asyncio.Queue[Event] = asyncio.Queue()
            closed.put_nowait(CLOSE)
            yield closed
            return
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = _Feed(probe, kind, last=initial)
            feed.task = asyncio.create_task(self._poll(key, feed), name=f"dashboard-feed-{key}")
        queue: asyncio.Queue[Event] = asyncio.Queue(QUEUE_SIZE)
        feed.subscribers.add(queue)
        try:
            yield queue
        finally:
            feed.subscribers.discard(queue)
            if not feed.subscribers and self._feeds.get(key) is feed:
                del self._feeds[key]
                if feed.task is not None:
                    feed.task.cancel()

    async def close(self) -> None:
        """End every stream (each gets ``CLOSE``) and stop polling; later ones end at once."""
        self._closed = True
        tasks = [f.task for f in self._feeds.values() if f.task is not None]
        for feed in self._feeds.values():
            for queue in feed.subscribers:
                _offer(queue, CLOSE, drop_all=True)
        self._feeds.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _poll(self, key: Hashable, feed: _Feed) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                found = await feed.probe(feed.last)
            except Exception as exc:  # the store may be down for a moment: keep watching
                log.warning("dashboard live feed %s: %r", key, exc)
                continue
            feed.last, data = found
            if data is None:
                continue
            event = Event(feed.kind, data)
            for queue in list(feed.subscribers):
                _offer(queue, event)


def _offer(queue: asyncio.Queue[Event], event: Event, drop_all: bool = False) -> None:
    if drop_all:
        while not queue.empty():
            queue.get_nowait()
    try:
        queue.put_nowait(event)
    except asyncio.QueueFull:
        # A browser that cannot keep up reloads instead of holding a backlog here.
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(RESET)


#: Sent at once on connect: how long the browser waits before reconnecting.
RETRY_MS = 3000
#: A comment line this often keeps proxies from closing an idle stream.
PING_EVERY = 15.0


def sse(event: str, data: str, event_id: str | None = None) -> str:
    """One Server-Sent Event; ``data`` may hold newlines."""
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.extend(f"data: {line}" for line in data.split("\n"))
    return "\n".join(lines) + "\n\n"


async def next_event(queue: asyncio.Queue[Event]) -> Event | None:
    """The next event, or None after PING_EVERY seconds of quiet."""
    try:
        return await asyncio.wait_for(queue.get(), PING_EVERY)
    except TimeoutError:
        return None
