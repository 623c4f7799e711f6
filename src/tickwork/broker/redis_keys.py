"""Everything the Redis adapters share: key names, priority lanes, the message format, and
how a client connects and backs off. Every Redis key tickwork uses is named here.

All keys sit under one hash tag, ``{prefix}``, so a Lua script may touch any of them even
on a Redis Cluster (they share a slot).
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tickwork.ports import Delivery, TaskKey

#: Errors that mean "the server is not reachable right now": back off and try again.
UNREACHABLE: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

#: Priority lanes, highest first. Above the default priority, the default, below it.
LANES: tuple[str, ...] = ("high", "normal", "low")

GROUP = "workers"  # the one consumer group of every stream


def lane_of(priority: int) -> str:
    """``high`` for priority > 0, ``normal`` for 0 (the default), ``low`` for < 0."""
    if priority > 0:
        return "high"
    return "normal" if priority == 0 else "low"


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """Key names under ``prefix`` (default ``tickwork``)."""

    prefix: str = "tickwork"

    def stream(self, queue: str, lane: str) -> str:
        """The stream of ready messages of one queue and lane."""
        return f"{{{self.prefix}}}:stream:{queue}:{lane}"

    def delayed(self, queue: str, lane: str) -> str:
        """Sorted set of messages published ahead: score = due epoch ms, member = message."""
        return f"{{{self.prefix}}}:delayed:{queue}:{lane}"

    def wake(self, queue: str) -> str:
        """A one-entry stream written when delayed work is added, to wake blocked consumers
        (they may be sleeping until a later due time)."""
        return f"{{{self.prefix}}}:wake:{queue}"

    def queues(self) -> str:
        """Set of the queue names ever published to (for ``depths``)."""
        return f"{{{self.prefix}}}:queues"

    def epoch(self) -> str:
        """A marker set once by the scheduler: missing means Redis lost its data (FLUSHALL,
        an empty restart), and with it every message, so the store's queue is re-sent."""
        return f"{{{self.prefix}}}:epoch"

    def cancel(self, key: TaskKey) -> str:
        """Present (with a TTL) while a cancel request of one attempt is remembered."""
        return f"{{{self.prefix}}}:cancel:{key[0]}:{key[1]}"

    def cancel_channel(self) -> str:
        """Pub/sub channel of cancel requests."""
        return f"{{{self.prefix}}}:cancel"

    def pattern(self) -> str:
        """Matches every key above (for tests and clean-up)."""
        return f"{{{self.prefix}}}:*"


def encode(delivery: Delivery) -> str:
    """The message: ids, attempt, queue and priority as JSON. Nothing executable."""
    return json.dumps(
        {
            "id": delivery.task_run_id,
            "attempt": delivery.attempt,
            "queue": delivery.queue,
            "priority": delivery.priority,
        },
        separators=(",", ":"),
    )


def decode(message: str, receipt: str) -> Delivery | None:
    """The delivery a message carries, or None if it is not one of ours."""
    try:
        data = json.loads(message)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    task_run_id, attempt = data.get("id"), data.get("attempt")
    queue, priority = data.get("queue"), data.get("priority")
    if not (isinstance(task_run_id, str) and isinstance(queue, str)):
        return None
    if type(attempt) is not int or type(priority) is not int:
        return None
    return Delivery(task_run_id, attempt, queue, priority, receipt)


def connect(url: str, name: str, *, retries: int = 2) -> aioredis.Redis:
    """A client for ``url`` (``redis://host:port/db``) that names itself ``name`` (seen in
    ``CLIENT LIST``) and retries a failed command ``retries`` times, briefly."""
    retry = Retry(ExponentialWithJitterBackoff(base=0.02, cap=0.5), retries)
    client: aioredis.Redis = aioredis.Redis.from_url(
        url,
        decode_responses=True,
        client_name=name,
        retry=retry,
        socket_connect_timeout=2.0,
        socket_timeout=5.0,
    )
    return client


class Backoff:
    """Growing pauses between attempts to reach a server that is down, and one log line
    per outage (not one per attempt)."""

    def __init__(self, log: logging.Logger, what: str, first: float = 0.05, cap: float = 2.0):
        self._log, self._what = log, what
        self._first, self._cap = first, cap
        self._delay = 0.0

    @property
    def failing(self) -> bool:
        return self._delay > 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns how long to pause before the next attempt."""
        if not self.failing:
            self._log.warning("%s: Redis unreachable (%r); retrying with backoff", self._what, exc)
        self._delay = min(max(self._delay * 2, self._first), self._cap)
        return self._delay * (0.5 + random.random() / 2)

    def succeeded(self) -> None:
        if self.failing:
            self._log.info("%s: Redis reachable again", self._what)
        self._delay = 0.0
