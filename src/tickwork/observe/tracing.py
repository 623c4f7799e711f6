"""OpenTelemetry tracing (``pip install tickwork[otel]``); off until configured.

One trace per run, whose **trace id is the run id** (both are 128 bits): every process that
touches a run (the API or scheduler that creates it, the worker that claims and runs its
task runs, the callbacks) finds the run's trace from the run id it already has, so nothing
is added to the store's rows or the broker's messages, and a message re-sent after a broker
wipe still joins its run's trace. The trace's root span, ``run <job>``, is recorded when the
run is created, with a span id derived from the run id, and a **link** to what created it
(the API request's span, or the scheduler pass), as OpenTelemetry's messaging conventions
have it for work handed from one trace to another.

Spans: ``run <job>`` (root), ``scheduler pass``, ``claim <job>.<task>``,
``attempt <job>.<task>``, ``callback <event> <job>.<task>``; the API request's span is
FastAPI's own (a child of the request's ``traceparent``), given this module's provider.
The attempt's context reaches the task: ``TRACEPARENT`` in a shell task's environment, a
``traceparent`` header on an http task, the current context for a python task (its own
spans are the attempt's children).

Configured by the standard variables, read by the SDK: tracing is on when
``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``) or an
``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`` is set, and ``OTEL_SDK_DISABLED`` is not true;
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_BSP_*`` and ``OTEL_EXPORTER_OTLP_*`` as documented by OpenTelemetry. Off, every hook
is one test of a module global (bench/metrics_cost.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from tickwork.core.model import Run, TaskKind, TaskRun
from tickwork.ports import LogSink, Runner, RunResult

log = logging.getLogger("tickwork.observe")

_HEX = re.compile(r"[0-9a-f]+")
_enabled = False
_tracer: Any = None
_provider: Any = None
_keep_all = True  # the sampler keeps every root (the default): no need to ask it per run
#: (trace id, span id) the next span started must take: the root span of a run.
_forced: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "tickwork_forced_ids", default=None
)


def enabled() -> bool:
    return _enabled


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def configure(service: str, env: Mapping[str, str] | None = None, exporter: Any = None) -> bool:
    """Turn tracing on if ``env`` (default: the environment) asks for it, or with
    ``exporter`` (a span exporter: tests pass the SDK's in-memory one, exported at once).
    ``service`` names the process kind (``tickwork-<service>`` unless ``OTEL_SERVICE_NAME``).
    Returns whether tracing is on. Configured from the environment, the provider is also
    made the global one (if none is yet), so a python task's own tracer joins the trace."""
    global _enabled, _tracer, _provider, _keep_all
    env = os.environ if env is None else env
    if exporter is None and not wanted(env):
        return False
    try:
        from tickwork.observe import otel_sdk
    except ImportError:
        log.warning("OTEL_* asks for traces but OpenTelemetry is not installed: "
                    "pip install 'tickwork[otel]'; tracing stays off")  # fmt: skip
        return False
    _provider = otel_sdk.provider(service, env, exporter, _forced, make_global=exporter is None)
    _tracer = _provider.get_tracer("tickwork")
    root = _provider.sampler.get_description()
    _keep_all = root.startswith(("AlwaysOnSampler", "ParentBased{root:AlwaysOnSampler"))
    _enabled = True
    return True


def provider() -> Any:
    """The tracer provider while tracing is on (None: off)."""
    return _provider


def shutdown() -> None:
    """Export what is buffered and turn tracing off."""
    global _enabled, _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _enabled, _tracer, _provider = False, None, None


# -- the run's trace ---------------------------------------------------------------------------
def _ids(run_id: str) -> tuple[int, int]:
    """The run's trace id (the run id) and its root span's id (its low 64 random bits). An
    id that is not 32 hex digits (none tickwork makes) is hashed to them instead: tracing
    must never fail a task."""
    if len(run_id) != 32 or not _HEX.fullmatch(run_id):
        run_id = hashlib.blake2b(run_id.encode(), digest_size=16).hexdigest()
    return int(run_id, 16) or 1, int(run_id[-16:], 16) or 1


def run_context(run_id: str) -> Any:
    """A context whose parent is the run's root span (for its task runs' spans), sampled as
    the root was: the sampler decides a root by its trace id alone (``always_on``,
    ``traceidratio`` and their ``parentbased_`` forms), so asking it again here gives the
    root's decision, and a run's trace is kept or dropped whole."""
    from opentelemetry import trace

    trace_id, span_id = _ids(run_id)
    sampled = (
        _keep_all or _provider.sampler.should_sample(None, trace_id, "run").decision.is_sampled()
    )
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if sampled else 0)
    parent = trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1e9)


def runs_created(runs: list[tuple[Run, str]]) -> None:
    """The root span of each new run (``(run, run id)``), linked to the current span."""
    from opentelemetry import context, trace

    here = trace.get_current_span().get_span_context()
    links = [trace.Link(here)] if here.is_valid else []
    for run, run_id in runs:
        token = _forced.set(_ids(run_id))
        try:
            span = _tracer.start_span(
                f"run {run.job_name}",
                context=context.Context(),  # a root: the ids come from ``_forced``
                kind=trace.SpanKind.PRODUCER,
                links=links,
                attributes={
                    "tickwork.job": run.job_name,
                    "tickwork.run_id": run_id,
                    "tickwork.trigger": str(run.trigger),
                    "tickwork.logical_date": run.logical_date.isoformat(),
                },
                start_time=_ns(run.created_at),
            )
        finally:
            _forced.reset(token)
        span.end()


def _task_attributes(tr: TaskRun) -> dict[str, Any]:
    return {
        "tickwork.job": tr.job_name,
        "tickwork.task": tr.task_name,
        "tickwork.run_id": tr.run_id,
        "tickwork.task_run_id": tr.id,
        "tickwork.attempt": tr.attempt,
        "tickwork.queue": tr.queue,
        "tickwork.kind": str(tr.kind),
    }


def claimed(task_runs: list[TaskRun], worker: str, start: datetime, end_ns: int) -> None:
    """A ``claim`` span per task run a worker won, in its run's trace (the attempt span
    carries the task run's other attributes)."""
    for tr in task_runs:
        since = tr.queued_at or tr.due_at
        attributes = {
            "tickwork.task_run_id": tr.id,
            "tickwork.attempt": tr.attempt,
            "tickwork.worker": worker,
            "tickwork.queue_wait_seconds": max((start - since).total_seconds(), 0.0),
        }
        span = _tracer.start_span(
            f"claim {tr.job_name}.{tr.task_name}",
            context=run_context(tr.run_id),
            attributes=attributes,
            start_time=_ns(start),
        )
        span.end(end_time=max(end_ns, _ns(start)))


@contextlib.contextmanager
def scheduler_pass() -> Iterator[None]:
    """The span of one scheduler pass; runs it creates link to it."""
    from opentelemetry import trace

    with _tracer.start_as_current_span("scheduler pass", kind=trace.SpanKind.INTERNAL):
        yield


@contextlib.contextmanager
def callback_span(context: Any) -> Iterator[None]:
    """The span of a callback, in its run's trace: a task run's (``on_success``...; a
    ``hooks.CallbackContext``) or a run's alert (``on_missed``...; an ``AlertContext``)."""
    task = getattr(context, "task_name", None)
    where = f"{context.job_name}.{task}" if task else context.job_name
    attributes = {
        "tickwork.job": context.job_name,
        "tickwork.run_id": context.run_id,
        "tickwork.callback": str(context.event),
    }
    if task:
        attributes |= {
            "tickwork.task": task,
            "tickwork.task_run_id": context.task_run_id,
            "tickwork.attempt": context.attempt,
        }
    with _tracer.start_as_current_span(
        f"callback {context.event} {where}",
        context=run_context(context.run_id),
        attributes=attributes,
    ):
        yield


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span."""
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def with_traceparent(task_run: TaskRun, value: str) -> TaskRun:
    """The task run with ``value`` handed to its task: ``TRACEPARENT`` in a shell task's
    environment, a ``traceparent`` header on an http task (one the task sets stays)."""
    config = dict(task_run.config)
    if task_run.kind is TaskKind.SHELL:
        config["env"] = {"TRACEPARENT": value, **(config.get("env") or {})}
    elif task_run.kind is TaskKind.HTTP:
        config["headers"] = {"traceparent": value, **(config.get("headers") or {})}
    else:
        return task_run
    return replace(task_run, config=config)


async def traced_attempt(
    runner: Runner, task_run: TaskRun, log: LogSink, cancel: asyncio.Event
) -> RunResult:
    """``runner.run`` inside an ``attempt`` span of the run's trace; the span's context is
    the current one while the task runs, and handed to it (``with_traceparent``)."""
    from opentelemetry import trace

    with _tracer.start_as_current_span(
        f"attempt {task_run.job_name}.{task_run.task_name}",
        context=run_context(task_run.run_id),
        kind=trace.SpanKind.CONSUMER,
        attributes=_task_attributes(task_run),
        record_exception=False,
    ) as span:
        result = await runner.run(with_traceparent(task_run, traceparent() or ""), log, cancel)
        outcome = "success" if result.ok else "cancelled" if result.cancelled else "failed"
        span.set_attribute("tickwork.outcome", outcome)
        if result.exit_code is not None:
            span.set_attribute("tickwork.exit_code", result.exit_code)
        if not result.ok and not result.cancelled:
            span.set_status(trace.Status(trace.StatusCode.ERROR, result.error or outcome))
        return result
