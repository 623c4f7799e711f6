"""The opt-in batching producer (``tickwork.sdk.producer``) against a real HTTP server."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.api.test_sdk_pool import Connections, served
from tickwork.sdk import ApiError, Client
from tickwork.sdk.producer import Producer

__all__ = ["served"]  # the fixture, shared with test_sdk_pool


async def test_calls_from_threads_go_in_few_requests_and_each_gets_its_run(
    served: tuple[str, Connections], admin_token: str
) -> None:
    url, counted = served

    def produce() -> list[str]:
        with Client(url, token=admin_token) as tw, Producer(tw, linger=0.05) as producer:
            with ThreadPoolExecutor(4) as pool:
                futures = list(pool.map(lambda _: producer.enqueue("work"), range(100)))
            ids = [f.result(timeout=30) for f in futures]
            assert tw.get_run(ids[-1])["job_name"] == "work"
            return ids

    before = counted.requests
    ids = await asyncio.to_thread(produce)
    assert len(set(ids)) == 100
    assert counted.requests - before <= 10  # 100 runs, a handful of batches (+ one get_run)


async def test_close_sends_what_waits_without_waiting_for_the_linger(
    served: tuple[str, Connections], admin_token: str
) -> None:
    url, _ = served

    def produce() -> float:
        with Client(url, token=admin_token) as tw:
            producer = Producer(tw, linger=10.0)
            futures = [producer.enqueue("work") for _ in range(5)]
            start = time.monotonic()
            producer.close()
            assert all(f.done() and f.exception() is None for f in futures)
            with pytest.raises(RuntimeError, match="closed"):
                producer.enqueue("work")
            return time.monotonic() - start

    assert await asyncio.to_thread(produce) < 5.0


async def test_a_full_batch_goes_at_once_and_a_refused_one_fails_each_future(
    served: tuple[str, Connections], admin_token: str
) -> None:
    url, _ = served

    def produce() -> None:
        with Client(url, token=admin_token) as tw, Producer(tw, linger=10.0, max_batch=10) as p:
            full = [p.enqueue("work") for _ in range(10)]
            assert len({f.result(timeout=30) for f in full}) == 10  # before the linger ends
            missing = [p.enqueue("nope") for _ in range(3)]
            p.flush()
            for future in missing:
                error = future.exception()
                assert isinstance(error, ApiError) and error.status == 404

    await asyncio.to_thread(produce)


def test_bad_settings_are_refused() -> None:
    with Client("http://127.0.0.1:9") as tw:
        with pytest.raises(ValueError, match="linger"):
            Producer(tw, linger=-1)
        with pytest.raises(ValueError, match="max_batch"):
            Producer(tw, max_batch=0)
