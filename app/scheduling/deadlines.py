"""Job timeouts on shared timers: the database worker's jobs whose timeouts end within
:data:`DEADLINE_SLACK_SECONDS` of each other share one event-loop timer, so a job is stopped at
most that late and a timer per job is not paid for."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from app.clock import loop_time

DEADLINE_SLACK_SECONDS = 0.05
"""Jobs whose timeouts end within this long of each other (at most a twentieth of the timeout)
share one timer: a job is stopped at most this late, and a timer per job is not paid for."""


class SharedDeadlines:
    """Timeout timers by due time (on the event loop's clock), each with the tasks it times out;
    ``on_due`` is called for each of those tasks still running when its timer fires."""

    def __init__(self, on_due: Callable[[asyncio.Task[None]], None]) -> None:
        self._on_due = on_due
        self._timers: dict[float, tuple[asyncio.TimerHandle, set[asyncio.Task[None]]]] = {}

    def arm(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[None], timeout: float
    ) -> float:
        """Time ``task`` out after ``timeout`` seconds, on a timer shared with the tasks whose
        timeout ends at nearly the same moment (rounded up: never early); returns its due time."""
        slack = min(DEADLINE_SLACK_SECONDS, timeout / 20)
        due = math.ceil((loop_time(loop) + timeout) / slack) * slack
        timer = self._timers.get(due)
        if timer is None:
            timer = self._timers[due] = (loop.call_at(due, self._passed, due), set())
        timer[1].add(task)
        return due

    def disarm(self, due: float, task: asyncio.Task[None]) -> None:
        """``task`` ended before its timer (due at ``due``) fired."""
        timer = self._timers.get(due)
        if timer is not None:
            timer[1].discard(task)

    def cancel(self) -> None:
        """Cancel every timer (the worker stopped)."""
        for timer, _ in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _passed(self, due: float) -> None:
        _, tasks = self._timers.pop(due, (None, set()))
        for task in tasks:
            if not task.done():
                self._on_due(task)
