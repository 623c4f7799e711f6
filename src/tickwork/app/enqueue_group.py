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

The next group's write starts once the previous one committed, while the previous group's
publish (the broker's round trip) is still in flight: each caller is still answered only
after its own group's publish, but the store's one write at a time does not wait for Redis.
(With a broker that ``SendsAhead``, the Enqueuer's ``publish`` returns once the publish is
written, so a lone caller is answered in the loop turn of its commit.)
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
        self._publishing: set[asyncio.Task[None]] = set()  # groups written, being published
        self._loop: asyncio.AbstractEventLoop | None = None
        self.groups = 0  # groups written (for tests and the bench: entries / groups)

    async def write(self, entry: EnqueueEntry) -> None:
        """Return once ``entry``'s runs are committed and published; raise its own error
        (``JobChanged``, ``KeyTaken``, ...) or its group's."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests, a CLI): the old one's are gone
            self._waiting, self._writing, self._drainer, self._loop = [], False, None, loop
            self._publishing = set()
        waiter: asyncio.Future[None] = loop.create_future()
        if self._writing:  # wait for the write in flight, then go with the next group
            self._waiting.append((entry, waiter))
            await waiter
            return
        # Alone: written at once, by this caller (no task, no hand-off between tasks).
        self._writing = True
        group = [(entry, waiter)]
        try:
            outcomes = await self._write(group)
        finally:
            if self._waiting:  # those that came meanwhile: a task writes them
                self._drainer = loop.create_task(self._drain(), name="tickwork-enqueue-groups")
            else:
                self._writing = False
        if outcomes is not None:
            await self._published(group, outcomes)
        waiter.result()

    async def _drain(self) -> None:
        try:
            while self._waiting:
                group = self._take()
                if group:
                    outcomes = await self._write(group)
                    if outcomes is not None:  # published beside the next group's write
                        self._publish_later(group, outcomes)
        finally:
            self._writing, self._drainer = False, None

    def _publish_later(self, group: list[_Waiting], outcomes: list[Exception | None]) -> None:
        task = asyncio.get_running_loop().create_task(
            self._published(group, outcomes), name="tickwork-enqueue-publish"
        )
        self._publishing.add(task)  # held until done (the loop keeps only a weak reference)
        task.add_done_callback(self._publishing.discard)

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

    async def _write(self, group: list[_Waiting]) -> list[Exception | None] | None:
        """Store ``group``: each entry's outcome, to publish; None if its callers are already
        answered (a failure)."""
        try:
            outcomes = await self._store.enqueue_each([entry for entry, _ in group])
        except StoreUnavailable as exc:
            _fail(group, exc)
            return None
        except Exception as exc:
            if len(group) == 1:
                _fail(group, exc)
            else:  # which entry broke it is not known: each alone, once
                await asyncio.gather(*(self._alone(item) for item in group))
            return None
        except BaseException as exc:  # cancelled (the loop is closing): answer, then stop
            _fail(group, StoreUnavailable(f"enqueue interrupted: {exc!r}"))
            raise
        self.groups += 1
        return outcomes

    async def _alone(self, item: _Waiting) -> None:
        outcomes = await self._write([item])
        if outcomes is not None:
            await self._published([item], outcomes)

    async def _published(self, group: list[_Waiting], outcomes: list[Exception | None]) -> None:
        written = [item for item, outcome in zip(group, outcomes, strict=True) if outcome is None]
        try:
            await self._publish([d for entry, _ in written for d in self._deliveries(entry)])
        except Exception as exc:  # stored, not handed to the broker: as a lone call fails
            _fail(written, exc)
            written = []
        except BaseException as exc:  # cancelled (the loop is closing): answer, then stop
            _fail(group, StoreUnavailable(f"enqueue interrupted: {exc!r}"))
            raise
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
