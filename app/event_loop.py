"""The event loop every long-running process runs on: uvloop where it is installed (it comes with
``uvicorn[standard]``), the standard library's loop otherwise.

``serve`` and ``worker`` do the same kind of work (database round trips, SMTP and HTTP
conversations, Redis commands), so they run on the same loop: uvicorn is told which one, and a
worker process is started on it here. uvloop's transports, timers and callbacks are written in
C; a worker sending mail spends a large share of its time in them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

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
