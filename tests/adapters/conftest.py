"""Fixtures of the adapter tests that talk to Redis directly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain redis-py client of the shared server (strings decoded), to look at keys."""
    c = aioredis.Redis.from_url(redis_url, decode_responses=True)
    yield c
    await c.aclose()


async def entries(client: aioredis.Redis, stream: str) -> list[tuple[str, dict[str, str]]]:
    """A stream's entries, oldest first: (id, fields)."""
    raw = await client.xrange(stream) or []
    return [(str(i), {str(k): str(v) for k, v in (f or {}).items()}) for i, f in raw]
