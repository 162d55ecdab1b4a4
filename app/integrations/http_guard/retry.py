"""How long to wait before retrying an outbound call: exponential backoff, or what the provider said.

Pure functions of the response headers and ``now``; the sleeping itself is :class:`RetryPolicy`'s
``sleep`` so tests can record waits instead of spending them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime


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


NO_RETRY = RetryPolicy(attempts=1)


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
