"""The SDK's own network wires (``sdk/http1.py``, ``sdk/http1_async.py``) against
the API served by a real uvicorn: what a call sends (path segments, query, body, headers) and
what it raises, the same through both clients."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI

from tests.api.conftest import cron_job
from tests.api.served import serving
from tickwork.sdk import ApiError, AsyncClient, Client, Unreachable

#: Runs one client method by name with the given arguments, through a sync or an async client.
Calling = Callable[..., Awaitable[Any]]


@pytest.fixture
async def url(app: FastAPI, api: httpx2.AsyncClient) -> AsyncIterator[str]:
    contract = {"properties": {"n": {"type": "integer"}}}
    for body in (cron_job("work"), cron_job("p.v-1_x", params=contract)):
        r = await api.post("/api/v1/jobs", json=body)
        assert r.status_code == 201, r.text
    async with serving(app) as served:
        yield served


def calling(kind: str, url: str, **options: Any) -> Calling:
    options.setdefault("timeout", 60.0)  # a loaded CI machine once took over 10 s for a GET

    async def call(method: str, *args: Any, **kwargs: Any) -> Any:
        if kind == "async":
            async with AsyncClient(url, **options) as tw:
                return await getattr(tw, method)(*args, **kwargs)

        def sync() -> Any:
            with Client(url, **options) as tw:
                return getattr(tw, method)(*args, **kwargs)

        return await asyncio.to_thread(sync)

    return call


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_params_reach_the_run(url: str, admin_token: str, kind: str) -> None:
    call = calling(kind, url, token=admin_token)
    made = await call("enqueue", "p.v-1_x", {"n": 3})
    run = await call("get_run", made["run_id"])
    assert run["job_name"] == "p.v-1_x"
    assert run["task_runs"][0]["config"]["kwargs"] == {"n": 3}


async def test_the_query_reaches_the_api_encoded(url: str, admin_token: str, kind: str) -> None:
    call = calling(kind, url, token=admin_token)
    page = await call("list_jobs", prefix="p.v", limit=1)
    assert [job["name"] for job in page["jobs"]] == ["p.v-1_x"]
    made = await call("enqueue", "work")
    # "+" is a space in a query unless encoded: the offset would be lost (422)
    runs = await call("list_runs", job="work", started_to="2999-01-01T00:00:00+02:00")
    assert made["run_id"] not in {r["id"] for r in runs["runs"]}  # not started yet
    runs = await call("list_runs", job="work", logical_from="2000-01-01T00:00:00+02:00")
    assert made["run_id"] in {r["id"] for r in runs["runs"]}


async def test_a_refusal_raises_api_error_with_the_field(
    url: str, admin_token: str, kind: str
) -> None:
    call = calling(kind, url, token=admin_token)
    with pytest.raises(ApiError) as refused:
        await call("enqueue", "p.v-1_x", {"n": "three"})
    assert refused.value.status == 422
    assert refused.value.field is not None and "n" in refused.value.field
    with pytest.raises(ApiError) as missing:
        await call("enqueue", "nope")
    assert (missing.value.status, missing.value.code) == (404, "not_found")


async def test_no_token_is_refused_with_401(url: str, kind: str) -> None:
    with pytest.raises(ApiError) as refused:
        await calling(kind, url)("list_jobs")
    assert refused.value.status == 401


async def test_the_idempotency_key_header_makes_a_retry_return_the_first_run(
    url: str, admin_token: str, kind: str
) -> None:
    call = calling(kind, url, token=admin_token)
    first = await call("enqueue", "work", idempotency_key="k-1")
    again = await call("enqueue", "work", idempotency_key="k-1")
    other = await call("enqueue", "work", idempotency_key="k-2")
    assert again["run_id"] == first["run_id"] != other["run_id"]


async def test_a_base_url_with_a_path_prefix_is_kept(
    app: FastAPI, admin_token: str, kind: str
) -> None:
    async def behind_a_proxy(scope: Any, receive: Any, send: Any) -> None:
        """A reverse proxy that serves the API under ``/tickwork``, and nothing else."""
        if scope["type"] == "http":
            if not scope["path"].startswith("/tickwork/"):
                await send({"type": "http.response.start", "status": 418, "headers": []})
                await send({"type": "http.response.body", "body": b"not under the prefix"})
                return
            scope = scope | {"path": scope["path"].removeprefix("/tickwork")}
            scope["raw_path"] = scope["path"].encode()
        await app(scope, receive, send)

    async with serving(behind_a_proxy) as served:
        jobs = await calling(kind, f"{served}/tickwork/", token=admin_token)("list_jobs")
    assert jobs["jobs"] == []


async def test_a_closed_port_raises_unreachable(kind: str) -> None:
    with pytest.raises(Unreachable, match=re.escape("127.0.0.1:9")):
        await calling(kind, "http://127.0.0.1:9", timeout=2.0)("health")


async def test_a_server_that_does_not_answer_raises_unreachable_after_the_timeout(
    kind: str,
) -> None:
    never = asyncio.Event()

    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await never.wait()  # reads the request, never answers

    async with serving(silent) as served:
        with pytest.raises(Unreachable):
            await calling(kind, served, timeout=0.5)("health")
        never.set()


@pytest.mark.parametrize(
    ("url", "reason"),
    [("http://", "no host"), ("ftp://x", "not an http"), ("localhost:8080", "not an http")],
)
async def test_a_url_that_is_no_server_raises_unreachable_on_the_call(
    kind: str, url: str, reason: str
) -> None:
    with pytest.raises(Unreachable, match=reason):
        await calling(kind, url)("health")
