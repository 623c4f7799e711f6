"""The shapes of one Redis Streams consume call (``RedisStreamsBroker.consume``): the keys it
reads, what one take script step found, and the blocking reads it keeps in flight between
calls."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from tickwork.ports import Delivery


@dataclass(frozen=True, slots=True)
class Layout:
    """The keys of one consume call: (queue, lane) pairs in read order and their keys."""

    pairs: tuple[tuple[str, str], ...]
    script_keys: tuple[str, ...]  # delayed set and stream of each pair, then wake streams
    streams: dict[str, int]  # stream of each pair -> the pair's (1-based) index
    wakes: tuple[str, ...]  # wake streams: the order of the script's newest ids


@dataclass(frozen=True, slots=True)
class Step:
    deliveries: list[Delivery]
    taken: int  # entries read, malformed ones included
    due_in: float  # seconds until the next delayed message is due (inf: none)
    newest: dict[str, str]  # wake stream -> newest entry id (empty if something was taken)


@dataclass(frozen=True, slots=True)
class Watcher:
    """A blocking read in flight; kept across calls while nothing new arrived (a group read
    must not be cancelled lightly: a message Redis already handed it stays pending until a
    reclaim)."""

    keys: frozenset[str]
    task: asyncio.Task[Any]


@dataclass(frozen=True, slots=True)
class GroupRead:
    """A blocking ``XREADGROUP`` in flight, and the layout its streams belong to."""

    layout: Layout
    task: asyncio.Task[Any]

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(self.layout.streams)


def end_read(task: asyncio.Task[Any]) -> None:
    """Cancel a read still in flight, or retrieve the outcome of one that ended."""
    if task.done():
        if not task.cancelled():
            task.exception()  # retrieved: it was handled where it mattered
    else:
        task.cancel()
