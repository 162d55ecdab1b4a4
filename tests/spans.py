"""Tracing in tests: an SDK tracer provider with an in-memory exporter, installed for one test.

Import the fixture into a test module (``from tests.spans import spans``) and read what was
recorded with ``spans.get_finished_spans()``; the helpers below sort them by name and kind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from app import telemetry


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(provider)
    try:
        yield exporter
    finally:
        telemetry.uninstall()
        provider.shutdown()


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def of_kind(spans: Sequence[ReadableSpan], kind: SpanKind) -> list[ReadableSpan]:
    return [s for s in spans if s.kind == kind]


def ancestors(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """``span``'s parent, its parent's parent, … among ``spans`` (nearest first)."""
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    chain = []
    current = span
    while current.parent is not None and current.parent.span_id in by_id:
        current = by_id[current.parent.span_id]
        chain.append(current)
    return chain
