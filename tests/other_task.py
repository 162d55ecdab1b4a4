"""Another task on the test's event loop, counting the turns the loop gives it: whether code under
test lets the loop's other tasks run (app.event_loop.Turns)."""

from __future__ import annotations

import asyncio
from types import TracebackType


class OtherTask:
    """``async with OtherTask() as other``: ``other.turns`` is how many turns it has had."""

    def __init__(self) -> None:
        self.turns = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> OtherTask:
        self._task = asyncio.create_task(self._take_turns())
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _take_turns(self) -> None:
        while True:
            self.turns += 1
            await asyncio.sleep(0)
