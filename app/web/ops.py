"""Liveness, readiness, Prometheus metrics, and the sweeper overview the dashboard and API show."""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from litestar import MediaType, Request, Response, get
from litestar.exceptions import NotAuthorizedException, NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.types import Scope
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from app.runtime import Runtime
from app.scheduling.metrics import JOBS_DEAD, JOBS_QUEUED, JOBS_RUNNING
from app.scheduling.sweeper import stale_sweeps, sweeper_states
from app.scheduling.unavailable import QueueUnavailable
from app.web.auth import get_runtime
from app.web.openapi_errors import ErrorBody

log = logging.getLogger(__name__)
access_log = logging.getLogger("app.access")

# Probes and assets would drown the useful lines; they are logged at DEBUG.
_QUIET_PREFIXES = ("/health", "/ready", "/metrics", "/static/")
# Inbound events arrive by the thousand a second, and a JSON access line costs more than storing
# the event: accepted ones are counted (``sweepline_ingest_requests_total``) and logged at DEBUG;
# refusals keep their line.
_INGEST_PREFIXES = ("/hooks/funnels/", "/t/c", "/t/o/", "/t/l/")
INGEST_REQUESTS = Counter(
    "sweepline_ingest_requests_total",
    "Requests answered by the event ingestion endpoints",
    ["status"],
)
_ingest_counters: dict[int, Any] = {}


def _count_ingest(status: int) -> None:
    counter = _ingest_counters.get(status)
    if counter is None:
        counter = _ingest_counters[status] = INGEST_REQUESTS.labels(str(status))
    counter.inc()


def log_request(scope: Scope, status: int, seconds: float) -> None:
    """One line per answered request (``seconds`` it took, on the runtime's clock). The query
    string is left out: it may carry a token."""
    path = str(scope.get("path", ""))
    level = logging.DEBUG if path.startswith(_QUIET_PREFIXES) else logging.INFO
    if path.startswith(_INGEST_PREFIXES):
        _count_ingest(status)
        if status < 400:
            level = logging.DEBUG
    if status == 503 and path == "/ready":
        # Not ready is the probe's documented answer, worth a warning, not a failure of the server.
        level = logging.WARNING
    elif status >= 500:
        level = logging.ERROR
    if not access_log.isEnabledFor(level):
        return
    access_log.log(
        level,
        "%s %s %s",
        scope.get("method", ""),
        path,
        status,
        extra={
            "method": scope.get("method", ""),
            "path": path,
            "status": status,
            "duration_ms": round(seconds * 1000, 1),
        },
    )


@dataclass(frozen=True, slots=True)
class SweepStatus:
    name: str
    schedule: str
    last_tick_at: datetime | None
    last_duration_ms: int | None
    last_lag_ms: int | None
    last_error: str | None
    ticks: int
    failures: int
    running: bool
    stale: bool = False
    """No successful tick within three intervals."""


async def sweeper_overview(runtime: Runtime) -> list[SweepStatus]:
    """Every registered sweep with its last tick (a sweep that never ran is listed too)."""
    now = runtime.clock.now()
    rows = await sweeper_states(runtime.db)
    stale = set(stale_sweeps(runtime.sweeps, rows, now, runtime.sweeping_since))
    states = {s.name: s for s in rows}
    schedules = {s.name: s.schedule.describe() for s in runtime.sweeps}
    out = []
    for name in sorted(set(states) | set(schedules)):
        state = states.get(name)
        out.append(
            SweepStatus(
                name=name,
                schedule=schedules.get(name, ""),
                last_tick_at=state.last_tick_at if state else None,
                last_duration_ms=state.last_duration_ms if state else None,
                last_lag_ms=state.last_lag_ms if state else None,
                last_error=state.last_error if state else None,
                ticks=state.ticks if state else 0,
                failures=state.failures if state else 0,
                running=bool(state and state.lease_until and state.lease_until > now),
                stale=name in stale,
            )
        )
    return out


@get("/health", media_type=MediaType.JSON, sync_to_thread=False)
def health() -> dict[str, str]:
    """Liveness: the process answers. Says nothing about the database or the queue."""
    return {"status": "ok"}


CHECK_SECONDS = 1.0
"""How long ``/ready`` waits for each dependency. Orchestrators' probes commonly give up after a
second (Kubernetes' default), and a check that has not answered by then has failed: a 503 in time
tells them more than a probe that times out. A Redis that accepts connections and never answers,
for one, holds its check for ``REDIS_TIMEOUT_SECONDS`` (2 s by default)."""


async def _answers(check: Awaitable[bool]) -> bool:
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            return await check
    except TimeoutError:
        return False
    except Exception:
        # A dependency that fails loudly (a reset connection, a read error while Redis starts)
        # is as unready as one that is silent: 503, never a 500.
        log.warning("a readiness check failed", exc_info=True)
        return False


@get(
    "/ready",
    media_type=MediaType.JSON,
    responses={503: ResponseSpec(dict[str, Any], description="Not ready (same body).")},
)
async def ready(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """Readiness: the database and the queue answer, and every sweep this process runs
    completed a tick within three intervals (503 naming the stale sweeps otherwise). Reports the
    platform-wide stop too. Each dependency has :data:`CHECK_SECONDS` to answer, both at once."""
    runtime = get_runtime(request)
    database, queue = await asyncio.gather(
        _answers(runtime.db.ping()), _answers(runtime.queue.ping())
    )
    stale: list[str] = []
    if database:
        try:
            stale = await runtime.stale_sweeps()
        except Exception:
            log.warning("sweeper state unavailable for /ready", exc_info=True)
            database = False
    stale.extend(runtime.stalled_workers())
    ok = database and queue and not stale
    body = {
        "status": "ready" if ok else "unavailable",
        "database": database,
        "queue": queue,
        "stale": stale,
        "queue_backend": runtime.queue.backend,
        "platform_stop": runtime.platform_stopped(),
    }
    return Response(body, status_code=200 if ok else 503)


QUEUE_UP = Gauge(
    "sweepline_job_queue_up",
    "1 when the job queue answered this scrape; 0 when it did not (its broker, Redis, is not "
    "reachable), and sweepline_jobs_queued, _running and _dead are left out of the scrape",
)
QUEUE_FIGURES = frozenset(
    m.name for g in (JOBS_QUEUED, JOBS_RUNNING, JOBS_DEAD) for m in g.describe()
)


class _Without(Collector):
    """The default registry without some metric families: figures that could not be read are
    left out rather than shown at their last value, which would look current."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def collect(self) -> Iterable[Metric]:
        return (m for m in REGISTRY.collect() if m.name not in self.names)


async def _queue_figures(runtime: Runtime) -> bool:
    """Set the queue's gauges; whether the queue answered."""
    try:
        stats = await runtime.queue.stats()
    except QueueUnavailable:
        # The queue logs the outage once (app.scheduling.unavailable), not each scrape.
        return False
    except Exception:
        log.warning("queue statistics unavailable for /metrics", exc_info=True)
        return False
    JOBS_QUEUED.set(stats.queued)
    JOBS_RUNNING.set(stats.running)
    JOBS_DEAD.set(stats.dead)
    return True


def check_metrics_token(request: Request[Any, Any, Any], token: str) -> None:
    """PL-14: the public listener's ``/metrics`` answers only ``Authorization: Bearer
    <METRICS_TOKEN>``; while no token is set it does not exist there (404)."""
    if not token:
        raise NotFoundException("Not found")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    # Compared in constant time: the answer's timing says nothing about how much of it matched.
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise NotAuthorizedException(
            "The metrics token is required: Authorization: Bearer <METRICS_TOKEN>",
            headers={"WWW-Authenticate": "Bearer"},
        )


@get(
    "/metrics",
    media_type=CONTENT_TYPE_LATEST,
    responses={
        401: ResponseSpec(
            ErrorBody, description="No METRICS_TOKEN, or another one.", generate_examples=False
        ),
        404: ResponseSpec(
            ErrorBody,
            description="METRICS_TOKEN is not set: metrics are not served on this listener.",
            generate_examples=False,
        ),
    },
)
async def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Prometheus text format, for a scraper holding ``METRICS_TOKEN`` (PL-14)."""
    runtime = get_runtime(request)
    check_metrics_token(request, runtime.settings.web.metrics_token)
    return Response(await scrape(runtime), media_type=CONTENT_TYPE_LATEST)


async def scrape(runtime: Runtime) -> bytes:
    """The Prometheus text. Queue depth and sweep staleness are read at scrape time so they
    are never out of date; while the queue does not answer, ``sweepline_job_queue_up`` is 0 and
    its figures are left out (an unreachable queue does not hide the other metrics)."""
    queue_up = await _queue_figures(runtime)
    QUEUE_UP.set(1 if queue_up else 0)
    try:
        await runtime.stale_sweeps()  # sets sweepline_sweep_stale at scrape time
    except Exception:
        log.warning("sweeper state unavailable for /metrics", exc_info=True)
    collector = REGISTRY if queue_up else _Without(QUEUE_FIGURES)
    return generate_latest(collector)


ROUTES = [health, ready, metrics]
