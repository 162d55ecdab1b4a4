"""One trace from the dispatch tick through the queued job to the Graph write: the sweep tick's
span, the per-account job's span (on the queue this suite runs on: the database queue, or arq on
Redis when ``TEST_REDIS_URL`` is set) and the write to the Graph simulator's span share one trace
id, each the child of the one before (AR-13's fan-out, followed end to end). No span carries the
access token (PL-3)."""

from __future__ import annotations

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from sqlalchemy import select

from app.engines.adrules.claim.sweep import DISPATCH_SWEEP
from app.engines.adrules.models import Batch
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.sweeper import SweepRunner
from app.settings import Settings
from app.web.app import create_app
from tests.conftest import eventually
from tests.engines.adrules.factories import (
    TOKEN,
    create_account,
    create_rule,
    create_workspace,
    store_token,
)
from tests.harness.app_client import asgi_transport
from tests.spans import ancestors, named, of_kind

PAUSE_EVERYTHING = [
    {
        "conditions": [
            {"type": "metric_value", "metric": "impressions", "operator": "gte", "value": "0"}
        ],
        "action": {"type": "pause_campaign"},
        "cooldown": "1h",
    }
]


async def test_ar13_the_tick_its_job_and_the_graph_write_are_one_trace(
    real_time_runtime: Runtime, world: GraphWorld, spans: InMemorySpanExporter
) -> None:
    runtime = real_time_runtime
    ws = await create_workspace(runtime, name="Traced")
    world.add_account("act_1", "One")
    world.add_campaigns("act_1", 2)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=[account.id], tasks=PAUSE_EVERYTHING
    )
    runner = SweepRunner(
        runtime.db, runtime.clock, [DISPATCH_SWEEP], runtime.context, owner="t", lease_seconds=60
    )
    assert await runner.run_tick(DISPATCH_SWEEP, runtime.clock.now())
    runtime.start_workers()

    async def job_span_ended() -> bool:
        return bool(named(spans.get_finished_spans(), "job adrules."))

    await eventually(job_span_ended, timeout=20)
    async with runtime.db.read() as session:
        batch = await session.scalar(select(Batch))
    assert batch is not None
    assert batch.status == "completed"
    assert {campaign for campaign, _ in world.updates} == {
        c.id for c in world.accounts["act_1"].campaigns.values()
    }

    finished = spans.get_finished_spans()
    (tick,) = named(finished, "sweep adrules.dispatch")
    (job,) = named(finished, "job adrules.")
    writes = [s for s in of_kind(finished, SpanKind.CLIENT) if s.name == "POST"]
    assert writes, [s.name for s in finished]
    assert tick.parent is None  # the tick starts the trace
    assert job.parent is not None
    assert job.parent.span_id == tick.context.span_id
    assert job.kind == SpanKind.CONSUMER
    assert job.attributes is not None
    assert job.attributes["messaging.system"] == runtime.queue.backend
    assert job.attributes["sweepline.job.attempt"] == 1
    for write in writes:
        assert write.context.trace_id == tick.context.trace_id
        assert job in ancestors(write, finished)
        assert write.attributes is not None
        assert write.attributes["sweepline.provider"] == "meta"
        assert write.attributes["http.response.status_code"] == 200
        assert write.status.status_code != StatusCode.ERROR
    # The dispatcher's reads are the tick's own calls, in the same trace.
    reads = [s for s in of_kind(finished, SpanKind.CLIENT) if s.name == "GET"]
    assert any(tick in ancestors(read, finished) for read in reads)
    assert {s.context.trace_id for s in [tick, job, *writes, *reads]} == {tick.context.trace_id}
    for span in finished:
        recorded = " ".join(str(v) for v in (span.attributes or {}).values())
        assert TOKEN not in recorded
        assert TOKEN not in span.name


async def test_ar13_a_run_now_request_its_job_and_the_graph_write_are_one_trace(
    real_time_runtime: Runtime, settings: Settings, world: GraphWorld, spans: InMemorySpanExporter
) -> None:
    """The same chain from a request: "run now" reads Meta and queues the job inside the
    request's span, and the job's writes continue that trace."""
    runtime = real_time_runtime
    ws = await create_workspace(runtime, name="Requested")
    world.add_account("act_1", "One")
    world.add_campaigns("act_1", 2)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    rule_id = await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=[account.id], tasks=PAUSE_EVERYTHING
    )
    app = create_app(settings, runtime, background=False)
    async with httpx.AsyncClient(
        transport=asgi_transport(app), base_url="http://testserver"
    ) as client:
        ran = await client.post(f"/api/v1/adrules/rules/{rule_id}/run", headers=ws.headers)
    assert ran.status_code == 200, ran.text
    runtime.start_workers()

    async def job_span_ended() -> bool:
        return bool(named(spans.get_finished_spans(), "job adrules."))

    await eventually(job_span_ended, timeout=20)
    finished = spans.get_finished_spans()
    (request,) = named(finished, "POST /api/v1/adrules/rules/")
    (job,) = named(finished, "job adrules.")
    writes = [s for s in of_kind(finished, SpanKind.CLIENT) if s.name == "POST"]
    assert writes
    assert request.attributes is not None
    assert request.attributes["http.response.status_code"] == 200
    assert request in ancestors(job, finished)
    for write in writes:
        assert [job, request] == [s for s in ancestors(write, finished) if s in (job, request)]
    assert {s.context.trace_id for s in [request, job, *writes]} == {request.context.trace_id}
