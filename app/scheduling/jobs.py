"""Job definitions: a stable name, a msgspec payload type, a handler and its retry policy.

A job is a thin wrapper: the handler opens its own units of work and calls engine code. Names are
explicit and stable (they are stored in queues), never a function's qualified name. Payloads are
msgspec structs encoded as JSON, never pickled.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec
from opentelemetry.trace import SpanKind

from app import telemetry
from app.scheduling.job_trace import seal, unseal

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database
    from app.platform.crypto import SecretBox
    from app.scheduling.queue import JobQueue
    from app.scheduling.resources import Resources
    from app.settings import Settings

P = TypeVar("P", bound=msgspec.Struct)

job_log = logging.getLogger("app.jobs")
"""One line per finished job attempt (both backends). Raise this logger's level to WARNING to keep
only failures when the per-job lines cost more than they tell."""

DEFAULT_QUEUE = "default"
PRIORITY_QUEUE = "priority"


class JobPayload(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Base class of every job payload."""


@dataclass(slots=True)
class JobContext:
    """What a running job gets: the database, the queue, the clock, settings and shared clients."""

    db: Database
    queue: JobQueue
    clock: Clock
    settings: Settings
    resources: Resources
    secrets: SecretBox
    job_id: str = ""
    attempt: int = 1
    tick: datetime | None = None
    """In a sweep: the tick's scheduled (nominal) time. Compare due times with it, not with the
    clock a few milliseconds later, so an item due exactly at the tick is taken by that tick."""


Handler = Callable[[JobContext, Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class OwnedBy:
    """Which workspace a job works for, read from its payload: the payload's ``field`` names a
    row of ``model`` (a table with ``id`` and ``workspace_id``), or with no model is the
    workspace's id itself. A job without one is a platform job (see
    :mod:`app.scheduling.job_owners`)."""

    field: str
    model: Any = None


@dataclass(frozen=True, slots=True)
class JobSpec(Generic[P]):
    name: str
    payload_type: type[P]
    handler: Callable[[JobContext, P], Awaitable[None]]
    max_tries: int = 5
    queue: str = DEFAULT_QUEUE
    timeout_seconds: float = 300.0
    backoff_seconds: float = 5.0
    """First retry delay; doubled on every further attempt (capped at one hour)."""
    owner: OwnedBy | None = None
    """The workspace the job works for; none: a platform job, seen by the instance's operators."""

    def encode(self, payload: P) -> bytes:
        """The bytes a queue stores: msgspec JSON, preceded by the trace context of the span it
        is queued in when tracing is on (:mod:`app.scheduling.job_trace`)."""
        if not isinstance(payload, self.payload_type):
            raise TypeError(f"job {self.name} takes {self.payload_type.__name__}")
        return seal(msgspec.json.encode(payload))

    def decode(self, raw: bytes) -> P:
        return msgspec.json.decode(unseal(raw)[1], type=self.payload_type)

    def retry_delay(self, attempt: int) -> float:
        return float(min(3600.0, self.backoff_seconds * (2 ** max(0, attempt - 1))))

    def is_last_attempt(self, attempt: int) -> bool:
        """Whether a failure of ``attempt`` ends the job (it is not retried)."""
        return attempt >= self.max_tries


@dataclass(slots=True)
class JobRegistry:
    """All jobs a process can run, by name."""

    specs: dict[str, JobSpec[Any]] = field(default_factory=dict)

    def add(self, spec: JobSpec[Any]) -> None:
        existing = self.specs.get(spec.name)
        if existing is not None and existing is not spec:
            raise ValueError(f"two jobs are named {spec.name!r}")
        self.specs[spec.name] = spec

    def extend(self, specs: Iterable[JobSpec[Any]]) -> None:
        for spec in specs:
            self.add(spec)

    def get(self, name: str) -> JobSpec[Any]:
        return self.specs[name]

    @property
    def queues(self) -> list[str]:
        return sorted({s.queue for s in self.specs.values()} | {DEFAULT_QUEUE})


async def run_handler(spec: JobSpec[Any], ctx: JobContext, raw: bytes) -> None:
    """Decode and run one job (shared by both queue backends); with tracing on, in a span
    continuing the trace it was queued in."""
    traceparent, body = unseal(raw)
    if not telemetry.enabled():
        await spec.handler(ctx, msgspec.json.decode(body, type=spec.payload_type))
        return
    with telemetry.span(
        f"job {spec.name}",
        kind=SpanKind.CONSUMER,
        context=telemetry.parent(traceparent),
        # Few attributes: each costs the SDK a check and a copy, on every job.
        attributes=lambda: {
            "messaging.system": ctx.queue.backend,
            "messaging.destination.name": spec.queue,
            "messaging.message.id": ctx.job_id,
            "sweepline.job.attempt": ctx.attempt,
        },
    ):
        await spec.handler(ctx, msgspec.json.decode(body, type=spec.payload_type))


def log_job_done(job_id: str, name: str, attempt: int, seconds: float) -> None:
    if job_log.isEnabledFor(logging.INFO):
        job_log.info(
            "job done",
            extra={
                "job": name,
                "job_id": job_id,
                "attempt": attempt,
                "duration_ms": round(seconds * 1000, 1),
            },
        )


def log_job_failed(job_id: str, name: str, attempt: int, error: str, *, dead: bool) -> None:
    job_log.warning(
        "job dead" if dead else "job failed, will retry",
        extra={"job": name, "job_id": job_id, "attempt": attempt, "error": error},
    )
