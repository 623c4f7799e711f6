"""``/livez`` and ``/readyz``: 200 while alive and ready, 503 with a JSON reason otherwise; on
the probe app of ``--metrics-port`` and on the API app alike."""

from __future__ import annotations

import asyncio
import time

import httpx2
import pytest

from tests.observe.metric_values import value
from tickwork.api.app import create_app
from tickwork.app.services import Services
from tickwork.broker.memory import MemoryBroker
from tickwork.core.errors import StoreUnavailable
from tickwork.observe.health import STALLED_AFTER, Health
from tickwork.observe.http import MetricsEndpoint, probe_app
from tickwork.ports import Store


async def get(app: object, path: str) -> httpx2.Response:
    transport = httpx2.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx2.AsyncClient(transport=transport, base_url="http://probe.test") as client:
        return await client.get(path)


async def test_livez_is_503_once_a_loop_has_stopped() -> None:
    loop = asyncio.create_task(asyncio.sleep(3600), name="worker-pool")
    health = Health("worker", loops=[loop])
    app = probe_app(health, MetricsEndpoint())
    alive = await get(app, "/livez")
    assert (alive.status_code, alive.json()["status"]) == (200, "alive")
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    dead = await get(app, "/livez")
    assert dead.status_code == 503
    assert dead.json() | {"version": "-"} == {
        "status": "dead",
        "kind": "worker",
        "version": "-",
        "reason": "worker-pool stopped",
    }


async def test_livez_is_503_when_a_leading_scheduler_stops_passing() -> None:
    last = [time.time()]
    health = Health("scheduler", last_pass=lambda: last[0], monotonic=time.time)
    assert health.live().ok
    last[0] -= STALLED_AFTER + 5
    stalled = health.live()
    assert (stalled.status_code, stalled.body["status"]) == (503, "stalled")
    assert "no scheduler pass" in stalled.body["reason"]


async def test_readyz_names_the_dependency_that_does_not_answer() -> None:
    redis_up = [True]

    async def redis() -> None:
        if not redis_up[0]:
            raise StoreUnavailable("Redis unreachable: connection refused")

    async def database() -> None:
        return None

    app = probe_app(
        Health("scheduler", dependencies={"database": database, "redis": redis},
               describe=lambda: {"role": "standby"}),
        MetricsEndpoint(),
    )  # fmt: skip
    ready = await get(app, "/readyz")
    assert ready.status_code == 200
    assert ready.json()["role"] == "standby"
    redis_up[0] = False
    down = await get(app, "/readyz")
    assert down.status_code == 503
    assert down.json()["reason"] == "redis: Redis unreachable: connection refused"


async def test_probe_app_serves_prometheus_text() -> None:
    r = await get(probe_app(Health("worker"), MetricsEndpoint()), "/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    assert 'tickwork_build_info{version="' in r.text


async def test_api_probes_metrics_and_request_latency(store: Store) -> None:
    app = create_app(Services(store, MemoryBroker()))
    before = value(
        "tickwork_http_request_duration_seconds_count", route="/livez", method="GET", status="200"
    )
    assert (await get(app, "/livez")).status_code == 200
    assert (await get(app, "/readyz")).json()["status"] == "ready"
    health = (await get(app, "/healthz")).json()
    assert health["schema_revision"] is not None and health["status"] == "ok"
    text = (await get(app, "/metrics")).text
    assert "tickwork_http_request_duration_seconds_bucket" in text
    after = value(
        "tickwork_http_request_duration_seconds_count", route="/livez", method="GET", status="200"
    )
    assert after == before + 1
    # Unknown paths share one series: a scan of random URLs cannot grow the label set.
    await get(app, "/no/such/thing/12345")
    assert (
        value(
            "tickwork_http_request_duration_seconds_count",
            route="unmatched",
            method="GET",
            status="404",
        )
        >= 1
    )


async def test_api_readyz_is_503_when_the_database_is_gone(store: Store) -> None:
    app = create_app(Services(store, MemoryBroker()))
    await store.close()
    r = await get(app, "/readyz")
    assert r.status_code == 503
    assert r.json()["status"] == "unready" and r.json()["reason"].startswith("database")


@pytest.mark.parametrize("path", ["/livez", "/readyz", "/metrics", "/healthz"])
async def test_probes_need_no_token(store: Store, path: str) -> None:
    app = create_app(Services(store, MemoryBroker()))
    assert (await get(app, path)).status_code == 200
