"""The only place that reads the time.

Services receive a :class:`Clock`; pure functions receive ``now``. :class:`ManualClock` lets tests and
simulations move time by hand, including waking coroutines sleeping on it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for measuring durations."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


def loop_time(loop: asyncio.AbstractEventLoop | None = None) -> float:
    """The event loop's own clock (``loop`` or the running one): the time base of ``call_at``,
    read only by code that arms a timer on that loop or measures a pause it is about to take."""
    return (loop or asyncio.get_running_loop()).time()


class SystemClock:
    """Wall-clock time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that only moves when told to. Sleepers wake when the time passes their deadline."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)
        self._origin = self._now
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return (self._now - self._origin).total_seconds()

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(
            self._sleepers, (self._now + timedelta(seconds=seconds), next(self._seq), fut)
        )
        await fut

    def set(self, when: datetime) -> None:
        """Jump to ``when`` (never backwards) and wake the sleepers whose deadline passed."""
        when = when.astimezone(UTC)
        if when < self._now:
            raise ValueError("ManualClock cannot go backwards")
        self._now = when
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    def advance(self, seconds: float = 0, **delta: float) -> datetime:
        """Move forward by ``seconds`` (or ``timedelta`` keywords) and return the new time."""
        self.set(self._now + timedelta(seconds=seconds, **delta))
        return self._now

    @property
    def sleepers(self) -> int:
        """How many coroutines are waiting on this clock."""
        return sum(1 for _, _, f in self._sleepers if not f.done())
