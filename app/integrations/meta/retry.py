"""Retry a Graph call on transient errors only, on an injectable sleep.

The default schedule is the dispatcher's product rule (spec AR-12): 3 attempts in total, waiting
1 s and then 2 s. When Meta says how long to wait (``estimated_time_to_regain_access``) and that is
longer than the schedule's wait, the longer wait is used, up to ``max_wait_seconds``; a longer
throttle than that ends the retries at once rather than holding the caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from app.integrations.meta.errors import MetaError

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0)
"""Waits between attempts: 3 attempts in total, 1 s then 2 s apart."""


@dataclass(slots=True)
class RetryLog:
    """What happened: the number of attempts and each wait, for records and tests."""

    attempts: int = 0
    waits: list[float] = field(default_factory=list)


def next_wait(exc: MetaError, scheduled: float, max_wait_seconds: float) -> float | None:
    """How long to wait before trying again after the transient ``exc``: the schedule's wait, or
    Meta's estimate of when access returns when that is longer. None when the estimate is beyond
    ``max_wait_seconds``: calling again sooner would only be refused, so the caller stops now (and
    may come back later) instead of holding on or hammering."""
    estimate = exc.retry_after_seconds
    if estimate is None or estimate <= scheduled:
        return scheduled
    return estimate if estimate <= max_wait_seconds else None


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    sleep: Sleep,
    delays: tuple[float, ...] = RETRY_DELAYS,
    max_wait_seconds: float = 60.0,
    log: RetryLog | None = None,
) -> T:
    """Run ``call``; on a transient :class:`MetaError` wait and try again, ``len(delays) + 1``
    attempts in total. Permanent errors and the last failure are raised."""
    record = log if log is not None else RetryLog()
    for attempt in range(len(delays) + 1):
        record.attempts += 1
        try:
            return await call()
        except MetaError as exc:
            if not exc.transient or attempt == len(delays):
                raise
            wait = next_wait(exc, delays[attempt], max_wait_seconds)
            if wait is None:
                raise
            record.waits.append(wait)
            await sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
