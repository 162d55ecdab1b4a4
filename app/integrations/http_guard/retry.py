"""The one retry policy of outbound calls: which failures are tried again, how long to wait.

Whether a failure is transient is decided once, by :mod:`app.integrations.http_guard.classify`,
when the error is raised; this module only reads the verdict (``transient``) and the provider's
``Retry-After`` (:func:`retry_after_seconds`).

:meth:`RetryPolicy.run` is the only retry loop: it retries an :class:`OutboundError` whose
``transient`` and ``repeatable`` are true, waiting the schedule's delay or what the provider asked (``retry_after``)
when that is longer, and gives up at once when the provider asks for more than
``max_wait_seconds`` (the caller then schedules the retry instead of holding a worker). The waits
are exponential backoff with jitter, or a fixed ``schedule`` — the ad-rules dispatcher's product
rule of 3 attempts, 1 s then 2 s apart, is :data:`AD_RULES_SCHEDULE`. The sleep is injected, so
tests record waits instead of spending them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from app.integrations.http_guard.errors import OutboundError

T = TypeVar("T")
_log = logging.getLogger("app.integrations")


@dataclass(slots=True)
class RetryLog:
    """What one :meth:`RetryPolicy.run` did: the attempts made and each wait, for records."""

    attempts: int = 0
    waits: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """In-process retries of one call. What is still failing afterwards goes back to the caller
    (the outbox deliverer), which retries the effect later with the same idempotency key."""

    attempts: int = 3
    """Tries in total, the first one included."""
    backoff_seconds: float = 0.5
    """Wait after the first failure; doubles after each further failure."""
    max_backoff_seconds: float = 8.0
    max_wait_seconds: float = 30.0
    """A ``Retry-After`` longer than this is not slept here: the error is raised at once and carries
    ``retry_after`` so the caller can schedule the retry instead of holding a worker."""
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep)
    schedule: tuple[float, ...] | None = None
    """Fixed waits between tries (no jitter); when set, ``attempts`` is ``len(schedule) + 1``."""
    on_retry: Callable[[OutboundError, int, float], None] | None = None
    """Called before each wait with the failure, the number of the retry about to be made
    (1 for the first) and the wait — for a client's own log line."""

    @property
    def tries(self) -> int:
        return len(self.schedule) + 1 if self.schedule is not None else self.attempts

    def wait_after(self, failures: int, retry_after: float | None) -> float | None:
        """Wait before the next try after ``failures`` failed tries, or ``None`` to stop."""
        if failures >= self.tries:
            return None
        if retry_after is not None and retry_after > self.max_wait_seconds:
            return None
        if self.schedule is not None:
            scheduled = self.schedule[failures - 1]
        else:
            scheduled = backoff_delay(self, failures, None)
        return max(scheduled, retry_after) if retry_after is not None else scheduled

    async def run(self, call: Callable[[], Awaitable[T]], *, log: RetryLog | None = None) -> T:
        """Run ``call``, retrying transient :class:`OutboundError` s; the last one is raised."""
        record = log if log is not None else RetryLog()
        failures = 0
        while True:
            record.attempts += 1
            try:
                return await call()
            except OutboundError as exc:
                if not exc.transient or not exc.repeatable:
                    raise
                failures += 1
                wait = self.wait_after(failures, exc.retry_after)
                if wait is None:
                    raise
                _log.info(
                    "retrying outbound call",
                    extra={"provider": exc.provider, "status": exc.status, "delay": wait},
                )
                if self.on_retry is not None:
                    self.on_retry(exc, failures, wait)
            record.waits.append(wait)
            await self.sleep(wait)

    def with_sleep(self, sleep: Callable[[float], Awaitable[None]]) -> RetryPolicy:
        return dataclasses.replace(self, sleep=sleep)


NO_RETRY = RetryPolicy(attempts=1)
AD_RULES_SCHEDULE = (1.0, 2.0)
"""Spec AR-12: 3 attempts in total, waiting 1 s and then 2 s."""


def retry_after_seconds(headers: Mapping[str, str], now: datetime) -> float | None:
    """Seconds to wait according to ``Retry-After`` (delta-seconds or an HTTP date), if present."""
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def backoff_delay(policy: RetryPolicy, failures: int, retry_after: float | None) -> float:
    """Wait before the next try after ``failures`` failed tries (1 after the first failure).

    The provider's ``Retry-After`` wins; otherwise exponential backoff with jitter, so many workers
    retrying the same outage do not come back in lockstep.
    """
    if retry_after is not None:
        return retry_after
    base = min(policy.max_backoff_seconds, policy.backoff_seconds * 2.0 ** (failures - 1))
    return base * (0.5 + random.random() / 2)
