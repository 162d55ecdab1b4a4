"""Send slots that deliver their next message only once the previous one's outcome is committed.

A message the provider accepted but whose outcome was not yet committed is sent again after a
crash (with the same Message-ID: the receiver recognises the repeat, but the person may still
see it twice). Committing outcomes in groups keeps the database cost per message low; but if a
slot moved on to its next message while its previous outcome waited for the next commit, a
crash could leave two messages per slot unrecorded, and more while a slow commit holds the
group up. Here each slot hands its outcome to the one recorder and waits for that commit before
it delivers another, so a process killed at any moment leaves at most one unrecorded message
per slot — the one SMTP transaction (or provider call) each slot had in flight.

Waiting is not idling: a slot **prepares** its next message while the previous outcome's commit
runs — everything short of delivering it (:class:`Ready`). For SMTP that is the whole
transaction but the line that ends the data: the server delivers nothing before it, and drops
the message if the connection closes first (:class:`~app.integrations.mail.wire.Withheld`). The
commit's latency then overlaps the next message's rendering and round trips instead of adding
to them, and the bound above still holds.

Throughput is kept by grouping without waiting: the recorder commits whatever arrived while the
previous commit ran (outcomes that came in together share a transaction), and never sleeps to
gather more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
O = TypeVar("O")  # noqa: E741 - the outcome type
O_co = TypeVar("O_co", covariant=True)


class Ready(Protocol[O_co]):
    """A prepared attempt: :meth:`complete` delivers it and gives its outcome; :meth:`abort`
    gives it up with nothing delivered. Exactly one of them is called."""

    async def complete(self) -> O_co: ...

    def abort(self) -> None: ...


class Done(Generic[O]):
    """An attempt whose outcome is known without delivering anything (a recipient held back)."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: O) -> None:
        self.outcome = outcome

    async def complete(self) -> O:
        return self.outcome

    def abort(self) -> None:
        pass


async def send_and_record(
    items: Iterable[T],
    *,
    slots: int,
    prepare: Callable[[T], Awaitable[Ready[O]]],
    record: Callable[[list[O]], Coroutine[Any, Any, bool]],
    slot_gate: asyncio.Semaphore | None = None,
) -> bool:
    """``prepare`` each item and deliver it, ``slots`` at a time, and ``record`` the outcomes
    (one call per group, committed when it returns). A slot prepares its next item while its
    previous outcome's commit runs and delivers it (:meth:`Ready.complete`) only after ``record``
    returned. ``record`` returns False to stop (a lost lease): a prepared item is aborted, items
    not yet started are left alone, and False is returned.

    ``slot_gate``: a semaphore shared by several callers (a process's deliverer jobs), held by
    a slot from the start of a delivery until its outcome is recorded, so that all of them
    together have at most its value of unrecorded messages.
    """
    return await _Slots(items, prepare, slot_gate).run(max(1, slots), record)


class _Slots(Generic[T, O]):
    """One call of :func:`send_and_record`: the shared queue of items, the outcomes waiting for
    the recorder, and each one's commit (a future the slot awaits)."""

    def __init__(
        self,
        items: Iterable[T],
        prepare: Callable[[T], Awaitable[Ready[O]]],
        gate: asyncio.Semaphore | None,
    ) -> None:
        self.queue: Iterator[T] = iter(items)
        self.prepare = prepare
        self.gate = gate
        self.waiting: list[tuple[O, asyncio.Future[bool]]] = []
        self.arrived = asyncio.Event()
        self.working = 0
        self.failure: BaseException | None = None
        self.unsettled: set[asyncio.Future[bool]] = set()
        """Commits not yet answered: cancelled when the run ends without them, so their gate
        permits come back."""

    async def _deliver(self, ready: Ready[O]) -> asyncio.Future[bool]:
        """Complete ``ready`` and hand its outcome to the recorder; the returned future is its
        commit (the slot's gate permit, if any, is held until then)."""
        gate = self.gate
        if gate is not None:
            try:
                await gate.acquire()
            except BaseException:
                ready.abort()
                raise
        try:
            outcome = await ready.complete()
        except BaseException:
            if gate is not None:
                gate.release()
            raise
        committed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if gate is not None:
            committed.add_done_callback(lambda _: gate.release())
        self.unsettled.add(committed)
        committed.add_done_callback(self.unsettled.discard)
        self.waiting.append((outcome, committed))
        self.arrived.set()
        return committed

    async def _slot(self) -> None:
        previous: asyncio.Future[bool] | None = None
        try:
            for item in self.queue:  # shared by the slots: each item is taken once
                ready = await self.prepare(item)  # nothing delivered yet
                try:
                    going = previous is None or await previous
                except BaseException:
                    ready.abort()
                    raise
                if not going:
                    ready.abort()
                    return
                previous = await self._deliver(ready)
            if previous is not None:
                await previous
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
            for commit in list(self.unsettled):
                commit.cancel()  # a failed or cancelled recorder: no answer is coming

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
