"""Natural batching: items queue up while the previous batch is being written."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class Batcher(Generic[T]):
    """Collects items and hands them to ``flush`` in batches, one call per batch.

    There is no fixed interval: at low load a single item is written at once; under load
    the items that arrive during one write form the next batch. ``put`` returns a future
    resolved when the item's batch has been written (or failed). With ``linger`` (seconds),
    a batch waits that long for more items before it is written, unless it holds ``enough``
    (default ``max_batch``) or ``close`` was called: for writes nobody waits on, so that at
    low load a few items share a write instead of one write each, while under load nothing
    waits longer than it takes ``enough`` items to arrive. With ``busy_only`` as well, a
    batch lingers only while writes keep coming (the previous one ended less than ``linger``
    ago): after a quiet spell the first item is written at once, as without a linger.
    """

    def __init__(
        self,
        flush: Callable[[Sequence[T]], Awaitable[None]],
        max_batch: int = 1000,
        *,
        linger: float = 0.0,
        enough: int | None = None,
        busy_only: bool = False,
    ):
        self._flush = flush
        self._max = max_batch
        self._linger = linger
        self._enough = max_batch if enough is None else min(enough, max_batch)
        self._items: list[tuple[T, asyncio.Future[None] | None]] = []
        self._ready = asyncio.Event()
        self._full = asyncio.Event()  # a lingering batch goes now: ``enough`` items, or closing
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = False
        self._busy_only = busy_only
        self._written = float("-inf")  # when the last write ended (time.monotonic)

    def put(self, item: T) -> asyncio.Future[None]:
        """Queue ``item``; the future resolves once its batch is written."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._add(item, done)
        return done

    def put_nowait(self, item: T) -> None:
        """Queue ``item`` without a future (a failed write stops ``run`` loudly instead)."""
        self._add(item, None)

    def _add(self, item: T, done: asyncio.Future[None] | None) -> None:
        self._items.append((item, done))
        self._ready.set()
        self._idle.clear()
        if len(self._items) >= self._enough:
            self._full.set()

    def pending(self) -> int:
        return len(self._items)

    async def wait_idle(self) -> None:
        """Wait until everything queued so far has been written."""
        await self._idle.wait()

    async def run(self) -> None:
        """Flush until ``close`` is called and everything queued is written."""
        while True:
            await self._ready.wait()
            await self._linger_a_little()
            self._ready.clear()
            while self._items:
                batch, self._items = self._items[: self._max], self._items[self._max :]
                await self._write(batch)
            self._idle.set()
            if self._closing:
                return

    def close(self) -> None:
        self._closing = True
        self._ready.set()
        self._full.set()

    async def _linger_a_little(self) -> None:
        if self._linger <= 0 or self._closing or len(self._items) >= self._enough:
            return
        if self._busy_only and time.monotonic() - self._written >= self._linger:
            return
        self._full.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._linger):
                await self._full.wait()

    async def _write(self, batch: list[tuple[T, asyncio.Future[None] | None]]) -> None:
        try:
            await self._flush([item for item, _ in batch])
        except Exception as exc:
            for _, done in batch:
                if done is not None and not done.done():
                    done.set_exception(exc)
            raise
        finally:
            self._written = time.monotonic()
        for _, done in batch:
            if done is not None and not done.done():
                done.set_result(None)
