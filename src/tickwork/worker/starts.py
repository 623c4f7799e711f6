"""Starting held task runs in batches.

A task run claimed ahead of a free slot is marked unstarted by the next heartbeat (so the
reaper may give it back without spending an attempt); before it runs, the store must say it
is still ours (``ExecutionStore.start``). With a backlog most claimed task runs wait past a
heartbeat, so this is no rare path: one ``start`` a task run, one after the other, held W1
to ~500 jobs/s. Instead the task runs that get a slot while a ``start`` is in flight go
together in the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from tickwork.ports import TaskKey


class HeldStarts:
    """``await starts.start(key)``: whether the store still had ``key`` for us. Keys asked for
    while a batch is in flight go in the next batch; ``start_batch`` is called with each."""

    def __init__(self, start_batch: Callable[[Sequence[TaskKey]], Awaitable[set[TaskKey]]]):
        self._start_batch = start_batch
        self._waiting: dict[TaskKey, asyncio.Future[bool]] = {}
        self._flushing: asyncio.Task[None] | None = None

    async def start(self, key: TaskKey) -> bool:
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = asyncio.get_running_loop().create_future()
            # Its waiter may be gone (cancelled: the shield below) when a batch fails; the
            # exception is then nobody's to retrieve, and asyncio would log it as lost.
            future.add_done_callback(_retrieved)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.ensure_future(self._flush())
        return await asyncio.shield(future)  # one waiter cancelled leaves the batch alone

    async def _flush(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, {}
            try:
                won = await self._start_batch(list(batch))
            except asyncio.CancelledError:
                for future in batch.values():
                    future.cancel()
                for future in self._waiting.values():
                    future.cancel()
                self._waiting.clear()
                raise
            except Exception as exc:  # each waiter raises it, as its own call would have
                for future in batch.values():
                    future.set_exception(exc)
                continue
            for key, future in batch.items():
                future.set_result(key in won)


def _retrieved(future: asyncio.Future[bool]) -> None:
    if not future.cancelled():
        future.exception()
