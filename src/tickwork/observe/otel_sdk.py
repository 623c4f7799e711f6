"""The OpenTelemetry SDK set up for ``observe.tracing`` (imported only when tracing is on,
so that without the ``otel`` extra nothing here is needed)."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from tickwork.core.errors import ValidationError


class RunIds(IdGenerator):
    """Random ids, except for a run's root span: its trace id is the run id and its span id
    is derived from it (``tracing._ids``), so every process finds the run's trace."""

    def __init__(self, forced: contextvars.ContextVar[tuple[int, int] | None]) -> None:
        self._forced = forced
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        forced = self._forced.get()
        return forced[0] if forced else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        forced = self._forced.get()
        return forced[1] if forced else self._random.generate_span_id()


def exporter_from(env: Mapping[str, str]) -> SpanExporter:
    name = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if name == "console":
        return ConsoleSpanExporter()
    if name != "otlp":
        raise ValidationError(
            "OTEL_TRACES_EXPORTER", f"must be otlp, console or none, not {name!r}"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_* itself


def provider(
    service: str,
    env: Mapping[str, str],
    exporter: SpanExporter | None,
    forced: contextvars.ContextVar[tuple[int, int] | None],
    *,
    make_global: bool,
) -> Any:
    """A tracer provider for this process; with ``make_global``, also the global one when
    none is set yet (so a python task's own tracer joins the attempt's trace)."""
    name = env.get("OTEL_SERVICE_NAME") or f"tickwork-{service}"
    made = TracerProvider(
        resource=Resource.create({SERVICE_NAME: name}),
        id_generator=RunIds(forced),
        shutdown_on_exit=make_global,  # tracing.shutdown() flushes it; tests make many
    )
    if exporter is not None:
        made.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        made.add_span_processor(BatchSpanProcessor(exporter_from(env)))
    if make_global and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(made)
    return made
