"""Starting held task runs in batches, ahead of their slots.

A task run claimed ahead of a free slot is marked unstarted by the next heartbeat (so the
reaper may give it back without spending an attempt); before it runs, the store must say it
is still ours (``ExecutionStore.start``). With a backlog most claimed task runs wait past a
heartbeat, so this is no rare path: one ``start`` a task run, one after the other, held W1
to ~500 jobs/s. So the task runs that get a slot while a ``start`` is in flight go together
in the next one, and each batch also starts the next few held task runs in line for a slot
(``ahead``): they start in the store a moment before they get their slot, as a task run
claimed ahead is started from its claim until a heartbeat marks it, and their slots need not
wait for a ``start`` of their own. A task run started ahead and still waiting at the next
heartbeat is marked unstarted again (the pool's ``_beat``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence

from tickwork.ports import TaskKey


def _nothing_ahead(_busy: Collection[TaskKey]) -> list[TaskKey]:
    return []


class HeldStarts:
    """``await starts.start(key)``: whether the store still had ``key`` for us. Keys asked for
    while a batch is in flight go in the next batch; ``start_batch`` is called with each.

    ``ahead(busy)`` names held task runs next in line for a slot (none of ``busy``, the keys
    asked for or in flight) to start in the same batch; ``kick`` sends such a batch now when
    none is in flight. A key asked for while a batch holding it is in flight waits for that
    batch's answer.
    """

    def __init__(
        self,
        start_batch: Callable[[Sequence[TaskKey]], Awaitable[set[TaskKey]]],
        ahead: Callable[[Collection[TaskKey]], Sequence[TaskKey]] = _nothing_ahead,
    ) -> None:
        self._start_batch = start_batch
        self._ahead = ahead
        self._waiting: dict[TaskKey, asyncio.Future[bool]] = {}
        self._inflight: dict[TaskKey, asyncio.Future[bool]] = {}
        self._flushing: asyncio.Task[None] | None = None

    async def start(self, key: TaskKey) -> bool:
        future = self._inflight.get(key) or self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = _future()
        self.kick()
        return await asyncio.shield(future)  # one waiter cancelled leaves the batch alone

    def kick(self) -> None:
        """Send what waits, and the held task runs next in line, unless a batch is in flight
        (then the next batch takes them)."""
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.ensure_future(self._flush())

    @property
    def in_flight(self) -> bool:
        return bool(self._inflight)

    async def _flush(self) -> None:
        kicked = True  # the first batch may hold only task runs started ahead
        while kicked or self._waiting:
            kicked = False
            batch, self._waiting = self._waiting, {}
            for key in self._ahead(batch.keys()):
                batch.setdefault(key, _future())
            if not batch:
                return
            self._inflight = batch
            try:
                won = await self._start_batch(list(batch))
            except asyncio.CancelledError:
                for future in (*batch.values(), *self._waiting.values()):
                    future.cancel()
                self._waiting.clear()
                raise
            except Exception as exc:  # each waiter raises it, as its own call would have
                for future in batch.values():
                    future.set_exception(exc)
                continue
            finally:
                self._inflight = {}
            for key, future in batch.items():
                future.set_result(key in won)


def _future() -> asyncio.Future[bool]:
    future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    # Its waiter may be gone (cancelled: the shield in ``start``), or a key started ahead may
    # have none, when a batch fails; the exception is then nobody's to retrieve, and asyncio
    # would log it as lost.
    future.add_done_callback(_retrieved)
    return future


def _retrieved(future: asyncio.Future[bool]) -> None:
    if not future.cancelled():
        future.exception()
