"""Tracing: OpenTelemetry spans, exported over OTLP (HTTP/protobuf) when an endpoint is set.

``serve`` and ``worker`` call :func:`configure` once at start. With ``OTEL_EXPORTER_OTLP_ENDPOINT``
set it installs the SDK's tracer provider with a batch processor and the OTLP/HTTP exporter (the
SDK reads the other ``OTEL_*`` variables itself: headers, timeout, sampler); without it nothing is
installed, the SDK is not even imported, and :func:`tracer` answers ``None``: the instrumented
paths (requests, jobs, sweep ticks, outbound HTTP calls and SMTP sends) then take their plain
path and build no span and no attribute.

What is traced, and where: an HTTP request (``app.web.request_spans``), a job run on either queue
backend (``app.scheduling.jobs.run_handler``), a sweep tick (``app.scheduling.sweeper``), an
outbound HTTP call (``app.integrations.http_guard.tracing``) and an SMTP send
(``app.integrations.mail``). A job carries the W3C ``traceparent`` of the span it was queued in
(``app.scheduling.job_trace``), so a tick, the jobs it queued and their outside calls are one
trace.

The provider is this module's, not the OpenTelemetry API's global one (which can be set once per
process): tests install one with an in-memory exporter and take it away again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import lru_cache
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.trace import (
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
    get_current_span,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from app.logs import redact

if TYPE_CHECKING:
    from app.settings import TelemetrySettings

INSTRUMENTATION = "sweepline"
TRACES_PATH = "v1/traces"
"""Appended to ``OTEL_EXPORTER_OTLP_ENDPOINT``, as the OTLP exporter specification says for the
endpoint of all signals."""
MAX_STATUS_CHARS = 500

Attributes = Mapping[str, AttributeValue]

_tracer: Tracer | None = None
_PROPAGATOR = TraceContextTextMapPropagator()
_NO_SPAN: nullcontext[None] = nullcontext()


def tracer() -> Tracer | None:
    """The process's tracer; ``None`` when tracing is off (check it before building attributes)."""
    return _tracer


def enabled() -> bool:
    return _tracer is not None


def install(provider: TracerProvider) -> None:
    """Trace with ``provider`` from now on (``configure`` does this; tests pass their own)."""
    global _tracer
    _tracer = provider.get_tracer(INSTRUMENTATION)


def uninstall() -> None:
    """Stop tracing: spans are no longer made (the provider is the caller's to shut down)."""
    global _tracer
    _tracer = None


def traces_endpoint(base: str) -> str:
    return f"{base.rstrip('/')}/{TRACES_PATH}"


def configure(settings: TelemetrySettings) -> Callable[[], None] | None:
    """Install the OTLP-exporting tracer provider when an endpoint is configured.

    Returns the provider's shutdown (it exports the spans still buffered), or ``None`` when
    tracing is off and nothing was installed."""
    if not settings.otlp_endpoint:
        return None
    # Imported here: a process that does not trace never loads the SDK.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = SdkTracerProvider(resource=Resource.create({SERVICE_NAME: settings.service_name}))
    exporter = OTLPSpanExporter(endpoint=traces_endpoint(settings.otlp_endpoint))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider)

    def shutdown() -> None:
        uninstall()
        provider.shutdown()

    return shutdown


@contextmanager
def _recorded(
    active: Tracer,
    name: str,
    kind: SpanKind,
    attributes: Attributes | None,
    context: Context | None,
) -> Iterator[Span]:
    # Exceptions are recorded by type and redacted message, without the traceback: a span is
    # read by whoever reads the tracing backend, and secrets never leave in it (as in the logs).
    with active.start_as_current_span(
        name,
        context=context,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            fail(span, exc)
            raise


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Callable[[], Attributes] | None = None,
    context: Context | None = None,
) -> AbstractContextManager[Span | None]:
    """A span around the block, current inside it (``None`` as the block's value when tracing
    is off). ``attributes`` is called only when a span is made; ``context`` is the parent
    (default: the current span)."""
    active = _tracer
    if active is None:
        return _NO_SPAN
    return _recorded(active, name, kind, attributes() if attributes else None, context)


def fail(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc`` (its type and redacted message)."""
    kind = type(exc).__name__
    message = redact(str(exc))[:MAX_STATUS_CHARS]
    span.set_attribute("error.type", kind)
    span.add_event("exception", {"exception.type": kind, "exception.message": message})
    span.set_status(Status(StatusCode.ERROR, f"{kind}: {message}" if message else kind))


def fail_current(error: str) -> None:
    """Mark the current span failed with ``error`` (a caught failure the span should show)."""
    current = get_current_span()
    if current.is_recording():
        current.set_status(Status(StatusCode.ERROR, redact(error)[:MAX_STATUS_CHARS]))


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, ``None`` outside a span or when off."""
    if _tracer is None:
        return None
    ctx = get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def parent(traceparent: str | None) -> Context:
    """The context whose current span is the remote ``traceparent`` (an empty context, so a
    root span, when there is none or it does not parse)."""
    if not traceparent:
        return Context()
    return _parsed(traceparent)


@lru_cache(maxsize=1024)
def _parsed(traceparent: str) -> Context:
    # The jobs one tick queued share its traceparent: parsed once, not once per job (a context
    # is immutable, so sharing it is safe).
    return _PROPAGATOR.extract({"traceparent": traceparent}, context=Context())
