"""The event loop every long-running process runs on: uvloop where it is installed (it comes with
``uvicorn[standard]``), the standard library's loop otherwise.

``serve`` and ``worker`` do the same kind of work (database round trips, SMTP and HTTP
conversations, Redis commands), so they run on the same loop: uvicorn is told which one, and a
worker process is started on it here. uvloop's transports, timers and callbacks are written in
C; a worker sending mail spends a large share of its time in them.

One loop serves every task of a process, so a task that works through many items without
waiting keeps every other one waiting: :class:`Turns` is how such a loop lets the others have
their turn (SMTP exchanges, HTTP answers, lease renewals).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from app.clock import loop_time

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # pragma: no cover - a platform uvloop is not built for
    uvloop = None  # type: ignore[assignment]

UVICORN_LOOP: Literal["uvloop", "asyncio"] = "uvloop" if uvloop is not None else "asyncio"
"""What ``uvicorn.run(loop=…)`` is given, so ``serve`` runs on the loop a worker runs on."""


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of a new loop of that kind, or None for the standard library's default."""
    return uvloop.new_event_loop if uvloop is not None else None


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end on a new loop of that kind, as ``asyncio.run`` does."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)


TURN_SECONDS = 0.002
"""The longest a task working through many items keeps the loop before it lets the others run."""


class Turns:
    """Gives way to the loop's other tasks once ``turn`` seconds of work have gone by.

    A runner batch of 200 runs is about 25 ms of Python with no wait in it; on the loop of a
    process that also sends mail and answers HTTP, every SMTP round trip and request waited for
    it (the loop was held up to 59 ms at a time, ``bench/funnels_runner.py``). Call
    :meth:`give_way` between items: it costs a read of the loop's clock, and a turn of the loop
    when one is due. Made inside the running loop.
    """

    __slots__ = ("_ends", "_loop", "_turn")

    def __init__(self, turn: float | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._turn = TURN_SECONDS if turn is None else turn
        self._ends = loop_time(self._loop) + self._turn

    async def give_way(self) -> None:
        if loop_time(self._loop) < self._ends:
            return
        await asyncio.sleep(0)
        self._ends = loop_time(self._loop) + self._turn
