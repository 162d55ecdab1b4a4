"""The order in which one process's writers get SQLite's write lock: in turn, and a request never
behind more than one background transaction.

SQLite has one write lock and no queue for it. A writer that finds it taken sleeps in its busy
handler and looks again — after 1, 2, 5 … ms, then every 100 ms until ``busy_timeout`` — so
whoever happens to look just after the holder commits wins, and a writer that has waited a
while (looking only every 100 ms) keeps losing to writers that have just arrived. Measured on a
loaded two-core machine with an import running beside the API, the sweeps and the queue worker:
no transaction held the lock for much more than a second, yet writers waited up to 4.4 s, and
one past the 5 s ``busy_timeout`` answers "database is locked" — a 503 to a person, a failed
tick for a sweep.

The gate puts one process's writers in line before ``BEGIN IMMEDIATE`` (and before a statement
sent to the driver in autocommit mode, with :meth:`WriteGate.turn`): a writer takes its turn
when its transaction begins and gives it back when it ends, so the write lock passes from one
writer of the process to the next at once.

There are two lines, first come first served within each: requests, and the background (the
queue's workers and the sweeps, whose tasks run in :func:`background_context`). When both have
writers waiting, the turn alternates between them. A background transaction can hold the lock
for tens of milliseconds (a batch of stored events applied one by one, a sweep's tick), and
several wait in line at once; in a single line a request — the webhook whose sender is waiting
for its answer — queued behind all of them (measured: group commit at 64 requests in flight
fell from 5,700 to 280 events/s with the queue's workers running). Alternating, a request waits
for at most the transaction holding the lock and one background transaction, and the
background still gets every other turn, so it is never starved.

Other processes on the same file still meet SQLite's own busy handler. A writer waits in line at
most ``patience_seconds`` (the busy timeout); past that it goes to SQLite without the gate, which
answers as it did before — the gate can make a writer wait in turn, never for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable

log = logging.getLogger(__name__)

_IN_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "write_gate_in_background", default=False
)


def background_context() -> contextvars.Context:
    """A context for a background task (``asyncio.create_task(..., context=...)``): its writes,
    and those of the tasks it starts, wait in the background's line."""
    context = contextvars.copy_context()
    context.run(_IN_BACKGROUND.set, True)
    return context


class _Line:
    """One event loop's turns: who holds the lock, and who waits in which line."""

    def __init__(self) -> None:
        self.busy = False
        """Someone holds the lock. While no one does, no one waits: the turn passes on at once."""
        self.waiting: tuple[deque[asyncio.Future[None]], deque[asyncio.Future[None]]] = (
            deque(),  # requests
            deque(),  # the background
        )
        self.last_background = False
        """Whether the latest turn went to the background."""

    def pass_on(self) -> None:
        """The holder is done: the next turn goes to the line that did not have the last one,
        if anyone waits there, else to the other."""
        for background in (not self.last_background, self.last_background):
            line = self.waiting[background]
            while line:
                turn = line.popleft()
                if not turn.done():  # one that gave up waiting is skipped
                    turn.set_result(None)
                    self.last_background = background
                    return
        self.busy = False


class WriteGate:
    """In turn among one process's write transactions (per event loop); see the module."""

    def __init__(self, patience_seconds: float) -> None:
        self.patience_seconds = patience_seconds
        self._lines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Line] = (
            weakref.WeakKeyDictionary()
        )
        self._held: dict[int, _Line] = {}
        """The line each transaction in the gate holds, by the id of its driver connection."""
        self._waiting = 0
        self.on_leave: list[Callable[[], None]] = []
        """Called as a holder leaves, in the same step as its turn passes on (before the writer
        given it can run): where a test acts at the very moment of the hand-over."""

    @property
    def waiting(self) -> int:
        """Transactions waiting in line."""
        return self._waiting

    @property
    def holders(self) -> int:
        """Transactions holding the gate (0 or 1; one that ran out of patience went on without)."""
        return len(self._held)

    async def enter(self, holder: object) -> None:
        """Wait for ``holder``'s turn (a connection beginning a write transaction)."""
        if id(holder) in self._held:
            return  # its transaction already holds the gate (a new BEGIN on the same connection)
        loop = asyncio.get_running_loop()
        line = self._lines.get(loop)
        if line is None:
            line = self._lines[loop] = _Line()
        background = _IN_BACKGROUND.get()
        if not line.busy:
            line.busy, line.last_background = True, background
            self._held[id(holder)] = line
            return
        turn: asyncio.Future[None] = loop.create_future()
        line.waiting[background].append(turn)
        self._waiting += 1
        try:
            async with asyncio.timeout(self.patience_seconds):
                await turn
        except TimeoutError:
            self._give_up(line, turn)
            log.warning(
                "waited %.1f s in line for the write lock; trying without the gate",
                self.patience_seconds,
            )
            return
        except BaseException:
            self._give_up(line, turn)
            raise
        finally:
            self._waiting -= 1
        self._held[id(holder)] = line

    @staticmethod
    def _give_up(line: _Line, turn: asyncio.Future[None]) -> None:
        """A writer stops waiting (out of patience, or cancelled): a turn it was given just as it
        stopped goes to the next writer; else it leaves the line (``pass_on`` skips it)."""
        if turn.done() and not turn.cancelled():
            line.pass_on()
        else:
            turn.cancel()

    def leave(self, holder: object) -> None:
        """``holder``'s transaction ended (committed, rolled back or its connection lost)."""
        line = self._held.pop(id(holder), None)
        if line is not None:
            line.pass_on()
        for listener in self.on_leave:
            listener()

    @contextlib.asynccontextmanager
    async def turn(self, holder: object) -> AsyncIterator[None]:
        """``holder``'s turn for one statement that takes the write lock outside a transaction
        the engine began (an autocommit statement sent straight to the driver): it waits in the
        same line as the transactions and leaves it when the statement has ended."""
        await self.enter(holder)
        try:
            yield
        finally:
            self.leave(holder)
