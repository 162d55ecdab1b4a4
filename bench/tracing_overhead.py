"""What tracing costs the job queue: the queue benchmark's enqueue and drain, tracing off and on.

    .venv/bin/python bench/tracing_overhead.py [--jobs 20000] [--rounds 3] [--pg URL] [--skip-pg]

Each round runs the database queue of ``bench/queue_throughput.py`` (``DatabaseQueue.enqueue_many``
in units of work of 5,000, then the process's ``JOB_LEASE_LOOPS`` workers with 400 slots, 100 jobs
per lease, 200 prefetched, until every no-op job is recorded as done) on a fresh PostgreSQL
database and a fresh SQLite file, once with tracing off and once on, alternating so that a change
in the machine's load hits both alike; medians are printed side by side.

* **off**: no tracer installed — a process without ``OTEL_EXPORTER_OTLP_ENDPOINT``.
* **on**: the SDK's tracer provider with the batch span processor, as ``app.telemetry.configure``
  installs it, and the jobs queued inside a span (as a sweep tick or a request queues them): every
  stored payload carries the tick's ``traceparent`` and every run is a span, child of it. The
  exporter drops what it is handed: the figure is the process's cost (making, ending and batching
  the spans, the ``traceparent`` each job carries), not a collector's or the network's. Spans the
  processor's queue (2,048) cannot hold are dropped by the SDK, as in production under load; the
  spans exported are printed.

Then, in the same process, what one job's span costs (20,000 in a row, nothing else): with tracing
off, with the trace sampled out (``OTEL_TRACES_SAMPLER``: the span is made but not recorded), and
recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.trace import SpanKind
from queue_throughput import (
    NOOP,
    Noop,
    Result,
    database_queue,
    drop_pg_database,
    fresh_pg_database,
    median,
)

from app import telemetry
from app.scheduling.job_trace import unseal


class Dropping(SpanExporter):
    """Counts the spans it is handed and keeps none."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


async def one_round(url: str, jobs: int, traced: bool, name: str) -> tuple[Result, int]:
    if not traced:
        return await database_queue(url, jobs, 400, 100, 200, name), 0
    exporter = Dropping()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    telemetry.install(provider)
    try:
        with telemetry.span("bench tick"):
            result = await database_queue(url, jobs, 400, 100, 200, name)
    finally:
        telemetry.uninstall()
        provider.shutdown()
    return result, exporter.exported


def span_costs(spans: int = 20_000) -> dict[str, float]:
    """Microseconds per job span, in this process: off, sampled out, recorded (batch processor)."""
    costs: dict[str, float] = {}
    variants: list[tuple[str, TracerProvider | None]] = [
        ("off (no tracer)", None),
        ("on, trace sampled out (OTEL_TRACES_SAMPLER)", TracerProvider(sampler=ALWAYS_OFF)),
        ("on, recorded", TracerProvider(sampler=ParentBased(root=ALWAYS_ON))),
    ]
    for name, provider in variants:
        if provider is not None:
            provider.add_span_processor(BatchSpanProcessor(Dropping()))
            telemetry.install(provider)
        with telemetry.span("tick"):
            sealed = NOOP.encode(Noop(n=1))
        traceparent, _ = unseal(sealed)
        began = time.perf_counter()
        for _ in range(spans):
            with telemetry.span(
                "job bench.noop",
                kind=SpanKind.CONSUMER,
                context=telemetry.parent(traceparent),
                attributes=lambda: {
                    "messaging.system": "database",
                    "messaging.destination.name": "default",
                    "messaging.message.id": "bench.noop:0",
                    "sweepline.job.attempt": 1,
                },
            ):
                pass
        costs[name] = (time.perf_counter() - began) / spans * 1e6
        telemetry.uninstall()
        if provider is not None:
            provider.shutdown()
    return costs


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    parser.add_argument("--skip-pg", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sweepline-tracing-bench-"))
    rows: dict[tuple[str, bool], list[Result]] = {}
    exported: dict[str, list[int]] = {}
    backends = ["SQLite"] if args.skip_pg else ["PostgreSQL", "SQLite"]
    for _ in range(args.rounds):
        for backend in backends:
            for traced in (False, True):
                if backend == "PostgreSQL":
                    url = await fresh_pg_database(args.pg)
                else:
                    url = f"sqlite+aiosqlite:///{tmp / f'queue-{uuid.uuid4().hex[:6]}.db'}"
                try:
                    result, spans = await one_round(url, args.jobs, traced, backend)
                finally:
                    if backend == "PostgreSQL":
                        await drop_pg_database(url)
                rows.setdefault((backend, traced), []).append(result)
                if traced:
                    exported.setdefault(backend, []).append(spans)

    print(
        f"\n{args.jobs:,} no-op jobs, database queue; worker: 400 slots, 100 jobs per lease, "
        f"200 prefetched; median of {args.rounds} interleaved rounds\n"
    )
    print("| backend | tracing | enqueue jobs/s | drain jobs/s | spans exported |")
    print("|---|---|---:|---:|---:|")
    for backend in backends:
        drains = {}
        for traced in (False, True):
            results = rows[(backend, traced)]
            enqueue = median([r.enqueue_per_s or 0.0 for r in results])
            drains[traced] = median([r.drain_per_s for r in results])
            spans = f"{median([float(n) for n in exported[backend]]):,.0f}" if traced else "—"
            print(
                f"| {backend} | {'on' if traced else 'off'} | {enqueue:,.0f} | "
                f"{drains[traced]:,.0f} | {spans} |"
            )
        print(f"| {backend} | on / off (drain) | | {drains[True] / drains[False]:.2f} | |")
    print("\n| one job's span, in this process | µs |\n|---|---:|")
    for name, micros in span_costs().items():
        print(f"| {name} | {micros:.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
