"""Group commit of small enqueues: those that arrive while a write is in flight go together in
the next transaction.

A commit per request bounds a producer by the commit's round trip and WAL flush (a bare
one-row ``INSERT`` + commit runs ~2,450/s on one connection on the 2-core bench machine), and
costs every request a statement, a commit and a broker publish of its own. Here an enqueue
that finds no write in flight is written at once (no linger: a lone request pays nothing);
those that arrive meanwhile wait for it, then go together in one ``Store.enqueue_each`` (one
statement on PostgreSQL) and one broker publish, written by a task of their own (so that no
caller's cancellation cuts its neighbours' write). Each caller returns only once that
transaction committed, with its own outcome:

- an entry the store leaves out (its job changed, its ``Idempotency-Key`` taken) fails only
  its own caller, with the error it would have had alone;
- a group whose write fails as a whole is written again entry by entry, each alone, once: so
  one bad entry (a constraint it breaks) fails only its caller and delays its neighbours by
  one retry;
- a store failure (``StoreUnavailable``: nothing committed) fails every caller of the group.

Two entries with the same ``Idempotency-Key`` never share a group: the second waits for the
next, where it finds the first's record (or, if the first failed, writes). A caller cancelled
before its group is written is dropped from it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from tickwork.core.errors import StoreUnavailable
from tickwork.ports import Delivery, EnqueueEntry, Store

#: The most entries one group carries (the rest wait for the next).
MAX_GROUP = 100

Publish = Callable[[Sequence[Delivery]], Awaitable[None]]
_Waiting = tuple[EnqueueEntry, "asyncio.Future[None]"]


class EnqueueGroups:
    """Writes entries through ``Store.enqueue_each`` in groups, then ``publish`` es what each
    written entry queued (``deliveries(entry)``) in one call; see the module's doc."""

    def __init__(
        self,
        store: Store,
        publish: Publish,
        deliveries: Callable[[EnqueueEntry], list[Delivery]],
        *,
        max_group: int = MAX_GROUP,
    ) -> None:
        self._store, self._publish, self._deliveries = store, publish, deliveries
        self._max = max_group
        self._waiting: list[_Waiting] = []
        self._writing = False  # a write is in flight (its caller's, or the drainer's)
        self._drainer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.groups = 0  # groups written (for tests and the bench: entries / groups)

    async def write(self, entry: EnqueueEntry) -> None:
        """Return once ``entry``'s runs are committed and published; raise its own error
        (``JobChanged``, ``KeyTaken``, ...) or its group's."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests, a CLI): the old one's are gone
            self._waiting, self._writing, self._drainer, self._loop = [], False, None, loop
        waiter: asyncio.Future[None] = loop.create_future()
        if self._writing:  # wait for the write in flight, then go with the next group
            self._waiting.append((entry, waiter))
            await waiter
            return
        # Alone: written at once, by this caller (no task, no hand-off between tasks).
        self._writing = True
        try:
            await self._write([(entry, waiter)])
        finally:
            if self._waiting:  # those that came meanwhile: a task writes them
                self._drainer = loop.create_task(self._drain(), name="tickwork-enqueue-groups")
            else:
                self._writing = False
        waiter.result()

    async def _drain(self) -> None:
        try:
            while self._waiting:
                group = self._take()
                if group:
                    await self._write(group)
        finally:
            self._writing, self._drainer = False, None

    def _take(self) -> list[_Waiting]:
        group: list[_Waiting] = []
        later: list[_Waiting] = []
        keys: set[tuple[str, str]] = set()
        for item in self._waiting:
            entry, waiter = item
            if waiter.done():  # its caller was cancelled before the write: not written
                continue
            receipt = entry.receipt
            key = None if receipt is None else (receipt.token_id, receipt.key)
            if len(group) >= self._max or (key is not None and key in keys):
                later.append(item)
                continue
            group.append(item)
            if key is not None:
                keys.add(key)
        self._waiting = later
        return group

    async def _write(self, group: list[_Waiting]) -> None:
        try:
            outcomes = await self._store.enqueue_each([entry for entry, _ in group])
        except StoreUnavailable as exc:
            _fail(group, exc)
            return
        except Exception as exc:
            if len(group) == 1:
                _fail(group, exc)
            else:  # which entry broke it is not known: each alone, once
                await asyncio.gather(*(self._write([item]) for item in group))
            return
        except BaseException as exc:  # cancelled (the loop is closing): answer, then stop
            _fail(group, StoreUnavailable(f"enqueue interrupted: {exc!r}"))
            raise
        self.groups += 1
        await self._published(group, outcomes)

    async def _published(self, group: list[_Waiting], outcomes: list[Exception | None]) -> None:
        written = [item for item, outcome in zip(group, outcomes, strict=True) if outcome is None]
        try:
            await self._publish([d for entry, _ in written for d in self._deliveries(entry)])
        except Exception as exc:  # stored, not handed to the broker: as a lone call fails
            _fail(written, exc)
            written = []
        for (_, waiter), outcome in zip(group, outcomes, strict=True):
            if outcome is not None:
                _settle(waiter, outcome)
        for _, waiter in written:
            _settle(waiter, None)


def _fail(group: list[_Waiting], exc: BaseException) -> None:
    for _, waiter in group:
        _settle(waiter, exc)


def _settle(waiter: asyncio.Future[None], outcome: BaseException | None) -> None:
    with contextlib.suppress(asyncio.InvalidStateError):  # its caller was cancelled
        if outcome is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(outcome)
