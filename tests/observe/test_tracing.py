"""OpenTelemetry tracing end to end through an embedded engine (real SQLite store, scheduler,
worker pool, shell runner and API app), spans read from the SDK's in-memory exporter: the
API request continues its caller's trace, the run's trace (its id is the run id) holds the
claim, the attempt and the callback, links back to the request, and the task sees the
attempt's ``traceparent``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.fixtures import callbacks
from tests.fixtures.task_runs import make_task_run
from tests.helpers import eventually
from tickwork.api.app import create_app
from tickwork.api.auth import Security
from tickwork.app.settings import Settings
from tickwork.core.model import TaskKind
from tickwork.observe import tracing
from tickwork.ports import Scope, Store
from tickwork.serve.embedded import Embedded
from tickwork.serve.wiring import wire
from tickwork.worker import capture

API = "/api/v1"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
JOB = {
    "name": "traced",
    "schedule": {"kind": "cron", "cron": "0 0 1 1 *"},  # only runs when enqueued here
    "task": {"kind": "shell", "argv": ["sh", "-c", 'echo "tp=$TRACEPARENT"']},
    "callbacks": {"on_success": {"kind": "python", "target": "tests.fixtures.callbacks:record"}},
}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.configure("test", env={}, exporter=exporter)
    yield exporter
    tracing.shutdown()


@pytest.fixture
async def engine(sqlite_store: Store) -> AsyncIterator[Embedded]:
    rt = wire(sqlite_store, Settings(concurrency=2))
    capture.install()
    loops = [asyncio.create_task(rt.scheduler.run()), asyncio.create_task(rt.pool.run())]
    yield rt
    await rt.pool.drain(2.0)
    for loop in loops:
        loop.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    capture.uninstall()


@pytest.fixture
async def api(engine: Embedded) -> AsyncIterator[httpx2.AsyncClient]:
    security = Security.over(engine.services)
    admin = await security.tokens.create("admin", Scope.ADMIN)
    app = create_app(engine.services, security=security)
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {admin.secret}"}
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://t.test", headers=headers
    ) as client:
        yield client


async def run_to_success(api: httpx2.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    assert (await api.post(f"{API}/jobs", json=JOB)).status_code == 201
    r = await api.post(f"{API}/jobs/traced/runs", json={}, headers=headers)
    assert r.status_code in (200, 201, 202), r.text
    run_id = r.json()["run_id"]

    async def run() -> dict[str, Any]:
        found: dict[str, Any] = (await api.get(f"{API}/runs/{run_id}")).json()
        return found

    return await eventually(run, lambda d: d["state"] == "success")


async def output_of(api: httpx2.AsyncClient, run_id: str) -> str:
    r = await api.get(f"{API}/runs/{run_id}/logs")
    assert r.status_code == 200, r.text
    return "".join(c["data"] for c in r.json()["chunks"] if c["stream"] == "stdout")


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


async def test_one_trace_per_run_from_the_request_to_the_attempt_and_its_callback(
    spans: InMemorySpanExporter, api: httpx2.AsyncClient
) -> None:
    caller = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
    detail = await run_to_success(api, caller)
    run_id = detail["id"]
    trace_id = int(run_id, 16)
    await eventually(
        lambda: _now(named(spans, "callback on_success traced.main")), lambda found: found != []
    )

    (request,) = [
        s for s in named(spans, "POST ") if s.name.endswith("/jobs/{name}/runs")
    ]  # FastAPI's own server span
    assert request.kind is SpanKind.SERVER
    assert f"{request.context.trace_id:032x}" == CALLER_TRACE  # the caller's trace goes on
    assert request.parent is not None and f"{request.parent.span_id:016x}" == CALLER_SPAN

    (root,) = named(spans, "run traced")
    assert (root.context.trace_id, root.parent) == (trace_id, None)
    assert root.attributes is not None
    assert dict(root.attributes) == {
        "tickwork.job": "traced",
        "tickwork.run_id": run_id,
        "tickwork.trigger": "enqueue",
        "tickwork.logical_date": detail["logical_date"].replace("Z", "+00:00"),
    }
    assert [link.context.span_id for link in root.links] == [request.context.span_id]

    (claim,) = named(spans, "claim traced.main")
    (attempt,) = named(spans, "attempt traced.main")
    (callback,) = named(spans, "callback on_success traced.main")
    for span in (claim, attempt, callback):
        assert span.context.trace_id == trace_id, span.name
        assert span.parent is not None and span.parent.span_id == root.context.span_id
    assert attempt.attributes is not None
    assert {k: attempt.attributes[k] for k in ("tickwork.attempt", "tickwork.outcome")} == {
        "tickwork.attempt": 1,
        "tickwork.outcome": "success",
    }
    assert attempt.attributes["tickwork.queue"] == "default"
    assert claim.attributes is not None
    wait = claim.attributes["tickwork.queue_wait_seconds"]
    assert isinstance(wait, float) and wait >= 0

    # The task saw the attempt's context: its own spans would be the attempt's children.
    traceparent = f"00-{trace_id:032x}-{attempt.context.span_id:016x}-01"
    assert await output_of(api, run_id) == f"tp={traceparent}\n"
    assert callbacks.calls("traced")


async def test_a_python_task_runs_in_the_attempts_context(
    spans: InMemorySpanExporter, api: httpx2.AsyncClient
) -> None:
    task = {"kind": "python", "target": "tests.integration.engine_tasks:current_trace"}
    body = {**JOB, "name": "pytrace", "task": task}
    body.pop("callbacks")
    assert (await api.post(f"{API}/jobs", json=body)).status_code == 201
    run_id = (await api.post(f"{API}/jobs/pytrace/runs", json={})).json()["run_id"]

    async def run() -> dict[str, Any]:
        found: dict[str, Any] = (await api.get(f"{API}/runs/{run_id}")).json()
        return found

    detail = await eventually(run, lambda d: d["state"] == "success")
    (attempt,) = named(spans, "attempt pytrace.main")
    seen = f"{int(run_id, 16):032x}-{attempt.context.span_id:016x}"
    assert detail["task_runs"][0]["result"] == seen


async def test_a_failed_attempt_is_an_error_span(
    spans: InMemorySpanExporter, api: httpx2.AsyncClient
) -> None:
    body = {**JOB, "name": "broken", "task": {"kind": "shell", "argv": ["false"]}}
    body.pop("callbacks")
    assert (await api.post(f"{API}/jobs", json=body)).status_code == 201
    run_id = (await api.post(f"{API}/jobs/broken/runs", json={})).json()["run_id"]
    await eventually(lambda: _now(named(spans, "attempt broken.main")), lambda found: found != [])
    (attempt,) = named(spans, "attempt broken.main")
    assert attempt.context.trace_id == int(run_id, 16)
    assert attempt.status.status_code is StatusCode.ERROR
    assert attempt.attributes is not None and attempt.attributes["tickwork.outcome"] == "failed"


async def test_the_scheduler_pass_is_a_span_and_cron_runs_link_to_it(
    spans: InMemorySpanExporter, api: httpx2.AsyncClient
) -> None:
    body = {**JOB, "name": "every", "schedule": {"kind": "cron", "cron": "* * * * * *"}}
    body.pop("callbacks")
    r = await api.post(f"{API}/jobs", json=body)
    if r.status_code == 422:  # five-field cron only: a `now` job stands in for a fire
        body["schedule"] = {"kind": "now"}
        r = await api.post(f"{API}/jobs", json=body)
    assert r.status_code == 201, r.text
    await eventually(lambda: _now(named(spans, "attempt every.main")), lambda s: s != [])
    # A `now` run may be handed to the broker without a pass (the embedded window): the
    # passes are spans all the same, the next one within the scheduler's longest sleep.
    await eventually(lambda: _now(named(spans, "scheduler pass")), lambda s: s != [])
    (root,) = named(spans, "run every")[:1]
    assert root.links  # to the request that created it, or to the pass that fired it


async def test_off_no_span_and_no_traceparent(sqlite_store: Store, api: httpx2.AsyncClient) -> None:
    assert not tracing.enabled()
    detail = await run_to_success(api, {})
    assert await output_of(api, detail["id"]) == "tp=\n"


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_the_standard_variables_turn_it_on(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


async def _now(value: Any) -> Any:
    return value


def test_the_traceparent_goes_in_a_shell_env_and_an_http_header_a_tasks_own_wins() -> None:
    tp = "00-01a231e82ee81a0c278a51c9ec0b8502-be262122765c3402-01"
    shell = make_task_run(TaskKind.SHELL, {"argv": ["true"], "env": {"A": "1"}})
    assert tracing.with_traceparent(shell, tp).config["env"] == {"TRACEPARENT": tp, "A": "1"}
    http = make_task_run(TaskKind.HTTP, {"url": "http://x", "headers": {"traceparent": "mine"}})
    assert tracing.with_traceparent(http, tp).config["headers"] == {"traceparent": "mine"}
    bare = make_task_run(TaskKind.HTTP, {"url": "http://x"})
    assert tracing.with_traceparent(bare, tp).config["headers"] == {"traceparent": tp}
    python = make_task_run(TaskKind.PYTHON, {"target": "m:f"})
    assert tracing.with_traceparent(python, tp) is python  # its context travels otherwise


@pytest.mark.parametrize(
    ("sampler", "kept"), [("parentbased_always_on", True), ("always_off", False)]
)
def test_a_runs_spans_are_sampled_as_its_root_was(
    sampler: str, kept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)  # read by the SDK
    assert tracing.configure("test", env={}, exporter=InMemorySpanExporter())
    try:
        parent = trace.get_current_span(tracing.run_context("01a231e82ee81a0c278a51c9ec0b8502"))
        assert parent.get_span_context().trace_flags.sampled is kept
    finally:
        tracing.shutdown()


def test_the_exporter_is_named_by_otel_traces_exporter() -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    from tickwork.core.errors import ValidationError
    from tickwork.observe.otel_sdk import exporter_from

    assert isinstance(exporter_from({}), OTLPSpanExporter)
    assert isinstance(exporter_from({"OTEL_TRACES_EXPORTER": "console"}), ConsoleSpanExporter)
    with pytest.raises(ValidationError, match="must be otlp, console or none, not 'jaeger'"):
        exporter_from({"OTEL_TRACES_EXPORTER": "jaeger"})


def test_a_run_id_is_its_trace_id_and_any_other_id_still_gives_one() -> None:
    from tickwork.observe.tracing import _ids

    assert _ids("01a231e82ee81a0c278a51c9ec0b8502") == (
        0x01A231E82EE81A0C278A51C9EC0B8502,
        0x278A51C9EC0B8502,
    )
    trace_id, span_id = _ids("run-1")  # not one tickwork makes: hashed, never an error
    assert 0 < trace_id < 2**128 and 0 < span_id < 2**64
    assert _ids("run-1") == (trace_id, span_id)
