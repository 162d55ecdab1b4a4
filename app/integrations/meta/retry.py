"""Retry a Graph call on transient errors only, on an injectable sleep — the shared
:class:`~app.integrations.http_guard.RetryPolicy` with the dispatcher's schedule.

The default schedule is the dispatcher's product rule (spec AR-12): 3 attempts in total, waiting
1 s and then 2 s. When Meta says how long to wait (``estimated_time_to_regain_access``) and that is
longer than the schedule's wait, the longer wait is used, up to ``max_wait_seconds``; a longer
throttle than that ends the retries at once rather than holding the caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from app.integrations.http_guard import AD_RULES_SCHEDULE, RetryLog, RetryPolicy
from app.integrations.meta.errors import MetaError

__all__ = ["RETRY_DELAYS", "RetryLog", "Sleep", "next_wait", "with_retries"]

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

RETRY_DELAYS: tuple[float, ...] = AD_RULES_SCHEDULE
"""Waits between attempts: 3 attempts in total, 1 s then 2 s apart."""


def next_wait(exc: MetaError, scheduled: float, max_wait_seconds: float) -> float | None:
    """How long to wait before trying again after the transient ``exc``: the schedule's wait, or
    Meta's estimate of when access returns when that is longer. None when the estimate is beyond
    ``max_wait_seconds``: calling again sooner would only be refused, so the caller stops now (and
    may come back later) instead of holding on or hammering."""
    policy = RetryPolicy(schedule=(scheduled,), max_wait_seconds=max_wait_seconds)
    return policy.wait_after(1, exc.retry_after)


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    sleep: Sleep,
    delays: tuple[float, ...] = RETRY_DELAYS,
    max_wait_seconds: float = 60.0,
    log: RetryLog | None = None,
) -> T:
    """Run ``call``; on a transient :class:`MetaError` wait and try again, ``len(delays) + 1``
    attempts in total, under the shared :class:`~app.integrations.http_guard.RetryPolicy`.
    Permanent errors and the last failure are raised."""
    policy = RetryPolicy(schedule=delays, max_wait_seconds=max_wait_seconds, sleep=sleep)
    return await policy.run(call, log=log)
