"""Request size limit: an oversize body is refused with 413 in the error shape, writing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

from tests.api.conftest import error_of, now_job

API = "/api/v1"


async def test_oversize_body_is_413_and_creates_nothing(api: httpx2.AsyncClient) -> None:
    body = now_job("big", metadata={"blob": "x" * (1024 * 1024)})
    r = await api.post(f"{API}/jobs", json=body)
    assert r.status_code == 413
    assert error_of(r)["code"] == "payload_too_large"
    assert (await api.get(f"{API}/jobs/big")).status_code == 404


async def test_oversize_chunked_body_is_413(api: httpx2.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 65536

    r = await api.post(f"{API}/jobs", content=chunks())
    assert r.status_code == 413


async def test_body_under_the_limit_passes(api: httpx2.AsyncClient) -> None:
    body = now_job("small", metadata={"blob": "x" * 1000})
    assert (await api.post(f"{API}/jobs", json=body)).status_code == 201
