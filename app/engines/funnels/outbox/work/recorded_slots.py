"""Send slots that take their next message only once the previous one's outcome is committed.

A message the provider accepted but whose outcome was not yet committed is sent again after a
crash (with the same Message-ID: the receiver recognises the repeat, but the person may still
see it twice). Committing outcomes in groups keeps the database cost per message low; but if a
slot moved on to its next message while its previous outcome waited for the next commit, a
crash could leave two messages per slot unrecorded, and more while a slow commit holds the
group up. Here each slot hands its outcome to the one recorder and waits for that commit before
it takes another item, so a process killed at any moment leaves at most one unrecorded message
per slot — the one SMTP transaction (or provider call) each slot had in flight.

Throughput is kept by grouping without waiting: the recorder commits whatever arrived while the
previous commit ran (outcomes that came in together share a transaction), and never sleeps to
gather more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
O = TypeVar("O")  # noqa: E741 - the outcome type


async def send_and_record(
    items: Iterable[T],
    *,
    slots: int,
    attempt: Callable[[T], Awaitable[O]],
    record: Callable[[list[O]], Coroutine[Any, Any, bool]],
    slot_gate: asyncio.Semaphore | None = None,
) -> bool:
    """``attempt`` each item, ``slots`` at a time, and ``record`` the outcomes (one call per
    group, committed when it returns). A slot takes its next item only after ``record`` returned
    for its previous outcome. ``record`` returns False to stop (a lost lease): items not yet
    started are left alone, and False is returned.

    ``slot_gate``: a semaphore shared by several callers (a process's deliverer jobs), held by
    a slot from the start of an attempt until its outcome is recorded, so that all of them
    together have at most its value of unrecorded messages.
    """
    return await _Slots(items, attempt, slot_gate).run(max(1, slots), record)


class _Slots(Generic[T, O]):
    """One call of :func:`send_and_record`: the shared queue of items, the outcomes waiting for
    the recorder, and each one's commit (a future the slot awaits)."""

    def __init__(
        self,
        items: Iterable[T],
        attempt: Callable[[T], Awaitable[O]],
        gate: asyncio.Semaphore | None,
    ) -> None:
        self.queue: Iterator[T] = iter(items)
        self.attempt = attempt
        self.gate = gate
        self.waiting: list[tuple[O, asyncio.Future[bool]]] = []
        self.arrived = asyncio.Event()
        self.working = 0
        self.failure: BaseException | None = None

    async def _take(self, item: T) -> bool:
        outcome = await self.attempt(item)
        committed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting.append((outcome, committed))
        self.arrived.set()
        return await committed

    async def _slot(self) -> None:
        try:
            for item in self.queue:  # shared by the slots: each item is taken once
                if self.gate is None:
                    going = await self._take(item)
                else:
                    async with self.gate:
                        going = await self._take(item)
                if not going:
                    return
        except Exception as exc:  # handed to run(), which raises it once the rest is recorded
            self.failure = self.failure or exc
        finally:
            self.working -= 1
            self.arrived.set()

    async def run(self, slots: int, record: Callable[[list[O]], Coroutine[Any, Any, bool]]) -> bool:
        tasks = [asyncio.create_task(self._slot()) for _ in range(slots)]
        self.working = len(tasks)
        recording: asyncio.Task[bool] | None = None
        try:
            while self.working or self.waiting:
                await self.arrived.wait()
                self.arrived.clear()
                if self.waiting:
                    group, self.waiting[:] = list(self.waiting), []
                    # A task of its own: a cancelled caller (a job's timeout) still lets the
                    # commit of what was sent finish (below).
                    outcomes = [outcome for outcome, _ in group]
                    recording = asyncio.create_task(record(outcomes))
                    going = await asyncio.shield(recording)
                    for _, committed in group:
                        committed.set_result(going)
                    if not going:
                        return False
                if self.failure is not None:
                    raise self.failure
            return True
        except asyncio.CancelledError:
            await self._record_the_rest(tasks, recording, record)
            raise
        finally:
            for slot in tasks:
                slot.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _record_the_rest(
        self,
        tasks: list[asyncio.Task[None]],
        recording: asyncio.Task[bool] | None,
        record: Callable[[list[O]], Coroutine[Any, Any, bool]],
    ) -> None:
        """Cancelled: stop the slots (a message on the wire is left unrecorded, as a crash would
        leave it), then commit what was sent and not yet recorded, so it is not sent again."""
        for slot in tasks:
            slot.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if recording is not None:
            await asyncio.gather(recording, return_exceptions=True)
        if self.waiting:
            group, self.waiting[:] = list(self.waiting), []
            await record([outcome for outcome, _ in group])
