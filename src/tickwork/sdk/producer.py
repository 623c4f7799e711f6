"""An opt-in batching producer: many ``enqueue`` calls sent as few ``enqueue_many`` requests.

``Client.enqueue`` returns once its run is stored: one request and one transaction per run.
``Producer.enqueue`` instead returns a future at once; the runs of the same job (and priority)
given within ``linger`` seconds go together in one ``enqueue_many`` (one request, one
transaction, at most ``max_batch`` runs), as Kafka producers batch. A run is stored when its
future has its run id; ``flush()`` sends what is waiting and waits for it, and ``close()`` (or
the end of a ``with`` block) flushes. A batch the server refuses fails every future of it with
the same error: ``enqueue_many`` is all or none.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Self

from tickwork.sdk.clients import Client

#: The most runs the batch endpoint takes in one request.
MAX_BATCH = 5000

_Key = tuple[str, int | None]  # (job name, priority)


class Producer:
    """Batches ``enqueue`` calls over ``client`` (see the module's doc). Thread-safe."""

    def __init__(self, client: Client, *, linger: float = 0.005, max_batch: int = 1000) -> None:
        if not 0 <= linger <= 10:
            raise ValueError("linger must be 0 to 10 seconds")
        if not 1 <= max_batch <= MAX_BATCH:
            raise ValueError(f"max_batch must be 1 to {MAX_BATCH}")
        self._client, self._linger, self._max = client, linger, max_batch
        self._waiting: dict[_Key, list[tuple[Mapping[str, Any] | None, Future[str]]]] = {}
        self._since: dict[_Key, float] = {}
        self._lock = threading.Condition()
        self._send_lock = threading.Lock()  # one batch on the wire at a time, in order
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="tickwork-producer", daemon=True)
        self._thread.start()

    def enqueue(
        self, name: str, params: Mapping[str, Any] | None = None, *, priority: int | None = None
    ) -> Future[str]:
        """Queue one run of job ``name``; the future gets its run id once it is stored."""
        future: Future[str] = Future()
        key = (name, priority)
        with self._lock:
            if self._closed:
                raise RuntimeError("the producer is closed")
            batch = self._waiting.setdefault(key, [])
            if not batch:
                self._since[key] = time.monotonic()
            batch.append((params, future))
            if len(batch) >= self._max:
                self._since[key] = 0.0  # due now
            self._lock.notify()
        return future

    def flush(self) -> None:
        """Send every waiting run now and wait until each is stored or failed."""
        with self._lock:
            due = self._take(None)
        self._send_all(due)

    def close(self) -> None:
        """Flush, then stop the sending thread."""
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join()
        self.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._due_now():
                    self._lock.wait(self._next_wait())
                if self._closed:
                    return
                due = self._take(time.monotonic())
            self._send_all(due)

    def _due_now(self) -> bool:
        now = time.monotonic()
        return any(now - since >= self._linger for since in self._since.values())

    def _next_wait(self) -> float | None:
        if not self._since:
            return None
        return max(0.0, min(self._since.values()) + self._linger - time.monotonic())

    def _take(self, now: float | None) -> list[tuple[_Key, list[tuple[Any, Future[str]]]]]:
        """Remove and return the batches due at ``now`` (None: all of them)."""
        keys = [k for k in self._waiting if now is None or now - self._since[k] >= self._linger]
        for key in keys:
            del self._since[key]
        return [(key, self._waiting.pop(key)) for key in keys]

    def _send_all(self, due: list[tuple[_Key, list[tuple[Any, Future[str]]]]]) -> None:
        with self._send_lock:
            for (name, priority), batch in due:
                for start in range(0, len(batch), self._max):
                    self._send(name, priority, batch[start : start + self._max])

    def _send(self, name: str, priority: int | None, batch: list[tuple[Any, Future[str]]]) -> None:
        try:
            done = self._client.enqueue_many(name, [p for p, _ in batch], priority=priority)
        except Exception as exc:  # every run of the batch failed: enqueue_many is all or none
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), run_id in zip(batch, done["run_ids"], strict=True):
            future.set_result(run_id)
