"""Tracing (app/telemetry.py): the spans of an HTTP request, an outbound HTTP call and an SMTP
send, the OTLP/HTTP export, and nothing at all when no endpoint is configured.

The spans name what an operator follows (a request's route and status, the host an outside call
went to and its answer) and never a secret: no span carries a token or a recipient (PL-3)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app import telemetry
from app.integrations.http_guard import (
    AddressGuard,
    GuardedHttp,
    HttpRequest,
    PermanentError,
    StaticResolver,
)
from app.integrations.mail import MailSender, OutgoingEmail, PermanentMailError
from app.integrations.meta.client import AccessToken, GraphClient
from app.integrations.meta.errors import MetaError
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, serve_world
from app.sandbox.smtp import SmtpSink
from app.scheduling.job_trace import MARK
from app.scheduling.jobs import JobPayload, JobSpec
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep, SweepRunner
from app.settings import MailSettings, Settings, TelemetrySettings, load_settings
from app.web.app import create_app
from tests.harness.app_client import asgi_transport
from tests.spans import named

TOKEN = "EAAB-trace-secret-0123456789"
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _secret_free(span: object, *secrets: str) -> None:
    attributes = getattr(span, "attributes", None) or {}
    events = getattr(span, "events", ())
    recorded = " ".join(
        [getattr(span, "name", "")]
        + [str(v) for v in attributes.values()]
        + [str(v) for e in events for v in (e.attributes or {}).values()]
    )
    for secret in secrets:
        assert secret not in recorded


async def test_a_request_span_names_the_route_and_the_status(
    settings: Settings, runtime: Runtime, spans: InMemorySpanExporter
) -> None:
    app = create_app(settings, runtime, background=False)
    async with httpx.AsyncClient(
        transport=asgi_transport(app), base_url="http://testserver"
    ) as client:
        assert (await client.get("/health")).status_code == 200
        refused = await client.get("/api/v1/jobs/17")
        assert refused.status_code == 401
        await client.get("/health", headers={"traceparent": PARENT})

    health, continued = named(spans.get_finished_spans(), "GET /health")
    (job,) = named(spans.get_finished_spans(), "GET /api/v1/jobs/")
    assert health.kind == SpanKind.SERVER
    assert health.attributes is not None
    assert health.attributes["http.route"] == "/health"
    assert health.attributes["http.request.method"] == "GET"
    assert health.attributes["http.response.status_code"] == 200
    assert health.parent is None
    # The route's template, not the path: a path may carry an id or a token.
    assert job.attributes is not None
    assert job.attributes["http.route"] == job.name.removeprefix("GET ")
    assert "{" in job.attributes["http.route"]
    assert "17" not in job.name
    assert job.attributes["http.response.status_code"] == 401
    assert job.status.status_code != StatusCode.ERROR  # a refusal is an answer, not a failure
    # A caller's traceparent is continued.
    assert continued.context.trace_id == int(PARENT.split("-")[1], 16)
    assert continued.parent is not None
    assert continued.parent.span_id == int(PARENT.split("-")[2], 16)


@pytest.fixture
def graph_world() -> Iterator[GraphWorld]:
    world = GraphWorld()
    server = serve_world(world)
    try:
        yield world
    finally:
        server.stop()


async def test_pl3_an_outbound_span_says_method_host_and_status_and_no_token(
    graph_world: GraphWorld, spans: InMemorySpanExporter
) -> None:
    graph_world.add_account("act_1", "One")
    graph_world.grant(TOKEN, "act_1")
    base = graph_world.base_url
    graph = GraphClient(base, "v21.0")
    try:
        # A paging link as Meta returns it carries the token in its query.
        await graph.get_url(
            f"{base}/v21.0/act_1/campaigns?access_token={TOKEN}", AccessToken(TOKEN)
        )
        with pytest.raises(MetaError):
            await graph.request("GET", "act_1/campaigns", AccessToken("EAAB-not-granted-000"))
    finally:
        await graph.aclose()

    ok, refused = named(spans.get_finished_spans(), "GET")
    port = httpx.URL(base).port
    for span in (ok, refused):
        assert span.kind == SpanKind.CLIENT
        assert span.attributes is not None
        assert span.attributes["http.request.method"] == "GET"
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["server.port"] == port
        assert span.attributes["sweepline.provider"] == "meta"
        _secret_free(span, TOKEN, "act_1", "EAAB-not-granted-000")
    assert ok.attributes is not None
    assert refused.attributes is not None
    assert ok.attributes["http.response.status_code"] == 200
    assert ok.status.status_code != StatusCode.ERROR
    status = refused.attributes["http.response.status_code"]
    assert isinstance(status, int)
    assert status >= 400
    assert refused.status.status_code == StatusCode.ERROR


async def test_a_pinned_request_names_the_host_it_was_sent_for(
    graph_world: GraphWorld, spans: InMemorySpanExporter
) -> None:
    """The ``http_request`` client connects to the address it checked; the span names the host
    the user wrote, and the address as the peer."""
    port = httpx.URL(graph_world.base_url).port
    http = GuardedHttp(guard=AddressGuard(resolver=StaticResolver({"graph.test": ["127.0.0.1"]})))
    try:
        # The Graph simulator refuses a call without a token: a 4xx is an error of the client.
        with pytest.raises(PermanentError):
            await http.request(
                HttpRequest(method="GET", url=f"http://graph.test:{port}/v21.0/me"),
                allow_private=True,
            )
    finally:
        await http.aclose()
    (span,) = named(spans.get_finished_spans(), "GET")
    assert span.attributes is not None
    assert span.attributes["server.address"] == "graph.test"
    assert span.attributes["network.peer.address"] == "127.0.0.1"
    assert span.attributes["server.port"] == port
    assert span.attributes["sweepline.provider"] == "http_request"
    status = span.attributes["http.response.status_code"]
    assert isinstance(status, int)
    assert status >= 400


async def test_pl3_an_smtp_span_names_the_server_and_counts_recipients(
    spans: InMemorySpanExporter,
) -> None:
    with SmtpSink() as sink:
        sender = MailSender(MailSettings(smtp_port=sink.port))
        await sender.send(
            OutgoingEmail(
                to=["ada@example.com"], subject="Hello", text="Hi", message_id="<m1@sweepline>"
            )
        )
        with pytest.raises(PermanentMailError):
            await sender.send(OutgoingEmail(to=[], subject="x", text="x", message_id="<m2@s>"))
    assert len(sink.messages) == 1
    sent, empty = named(spans.get_finished_spans(), "smtp send")
    assert sent.kind == SpanKind.CLIENT
    assert sent.attributes is not None
    assert sent.attributes["server.address"] == "127.0.0.1"
    assert sent.attributes["server.port"] == sink.port
    assert sent.attributes["sweepline.mail.recipients"] == 1
    assert sent.status.status_code != StatusCode.ERROR
    _secret_free(sent, "ada@example.com")
    assert empty.status.status_code == StatusCode.ERROR
    assert empty.attributes is not None
    assert empty.attributes["error.type"] == "PermanentMailError"


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps each export request's path, content type and body."""

    received: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.received.append((self.path, self.headers.get("content-type", ""), body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Collector.received
    finally:
        server.shutdown()
        server.server_close()


async def test_spans_are_exported_over_otlp_http_when_an_endpoint_is_set(
    collector: tuple[str, list[tuple[str, str, bytes]]],
) -> None:
    url, received = collector
    settings = load_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_SERVICE_NAME": "sw-test"})
    shutdown = telemetry.configure(settings.telemetry)
    assert shutdown is not None
    try:
        with telemetry.span("sweep probe"):
            pass
    finally:
        shutdown()  # exports what the batch processor holds
    assert telemetry.tracer() is None
    ((path, content_type, body),) = received
    assert path == "/v1/traces"
    assert content_type == "application/x-protobuf"
    export = ExportTraceServiceRequest.FromString(body)
    (resource_spans,) = export.resource_spans
    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert resource["service.name"] == "sw-test"
    names = [s.name for scope in resource_spans.scope_spans for s in scope.spans]
    assert names == ["sweep probe"]


class _Ping(JobPayload, frozen=True):
    n: int


PING = JobSpec("test.ping", _Ping, lambda ctx, payload: None)  # type: ignore[arg-type, return-value]


def test_nothing_is_traced_or_loaded_without_an_endpoint() -> None:
    """Without ``OTEL_EXPORTER_OTLP_ENDPOINT`` nothing is installed: no tracer, no SDK loaded
    (so no exporter and no processor), no middleware, and a job is stored as plain JSON even
    when queued where a span would be."""
    settings = load_settings({})
    assert settings.telemetry == TelemetrySettings()
    assert telemetry.configure(settings.telemetry) is None
    assert telemetry.tracer() is None
    with telemetry.span("nothing") as span:
        assert span is None
        assert not PING.encode(_Ping(n=1)).startswith(MARK)
    # A fresh process, built the way `serve` builds it: the SDK is never imported.
    script = """
import asyncio, sys
import httpx
from app import telemetry
from app.settings import load_settings
from app.web.app import create_app
from app.web.request_spans import request_spans

from cryptography.fernet import Fernet

settings = load_settings({"DATABASE_URL": "sqlite+aiosqlite:///:memory:",
                          "ENCRYPTION_KEY": Fernet.generate_key().decode(),
                          "SESSION_SECRET": "s"})
assert telemetry.configure(settings.telemetry) is None
app = create_app(settings, background=False)
assert all(request_spans.__name__ not in getattr(m, "__qualname__", "") for m in app.middleware)

async def main():
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as client:
        assert (await client.get("/health")).status_code == 200

asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")
                or m.startswith("opentelemetry.exporter"))
assert not loaded, loaded
print("untraced")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("untraced")


async def test_a_failed_sweep_tick_is_a_failed_span(
    runtime: Runtime, spans: InMemorySpanExporter
) -> None:
    """The sweeper records a tick's error and goes on; its span says the tick failed."""

    async def broken(ctx: object, tick: object) -> None:
        raise RuntimeError("the tick broke")

    async def fine(ctx: object, tick: object) -> None:
        return None

    sweeps = [
        Sweep("test.broken", EVERY_10_SECONDS, broken),
        Sweep("test.fine", EVERY_10_SECONDS, fine),
    ]
    runner = SweepRunner(
        runtime.db, runtime.clock, sweeps, runtime.context, owner="t", lease_seconds=60
    )
    for sweep in sweeps:
        assert await runner.run_tick(sweep, runtime.clock.now())
    (failed,) = named(spans.get_finished_spans(), "sweep test.broken")
    (succeeded,) = named(spans.get_finished_spans(), "sweep test.fine")
    assert failed.status.status_code == StatusCode.ERROR
    assert "the tick broke" in (failed.status.description or "")
    assert failed.attributes is not None
    assert failed.attributes["sweepline.sweep.name"] == "test.broken"
    assert succeeded.status.status_code != StatusCode.ERROR
