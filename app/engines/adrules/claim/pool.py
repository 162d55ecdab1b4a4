"""The dispatch tick's campaign fetches: who gets a Graph slot, for how long, and when the tick stops
waiting (spec AR-10, AR-12a).

Three clocks run per account, all on the process's :class:`~app.clock.Clock` (manual time in tests):

- **Its own deadline** (``ADRULES_FETCH_DEADLINE_SECONDS``) starts when its first HTTP call is made,
  never while it waits for a slot: an account that hangs that long is recorded as skipped.
- **Its slot** (one of ``ADRULES_FETCH_CONCURRENCY``) is held only while the call behaves like a
  normal Graph call; after ``ADRULES_FETCH_SLOT_SECONDS`` the call keeps running towards its deadline
  but gives the slot to the next account. So accounts that hang — a Graph-wide slowdown — cannot
  keep healthy ones waiting: the next account starts every slot-time, not every deadline. At most
  ``outstanding`` calls are out at once, whatever hangs.
- **The tick's budget** (``ADRULES_TICK_BUDGET_SECONDS``) bounds the whole claim phase: when it is
  spent, accounts not reached and fetches still running are *deferred* (their batch records say so)
  and taken first by the next tick, so no account is starved by others hanging every tick.

Items are admitted strictly in the order they were submitted: the dispatcher submits deferred
accounts before the accounts of newly due rules.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.clock import Clock
from app.engines.adrules.claim.fetch import Fetched, FetchFailed, FetchProgress
from app.integrations.meta.errors import MetaError

FETCH_OUTSTANDING = 256
"""Campaign-list calls one tick keeps out at once, slow ones included (the Graph client's
connection pool is sized above it)."""

DEFERRED_REASON = "deferred: tick budget spent"
"""How a deferred account's batch record begins (read by people in the rule log)."""
STOPPED_REASON = "deferred: the tick was stopped"
"""The result of a fetch its tick stopped before it ended (nobody records it: the tick's
records stop with it)."""


@dataclass(frozen=True, slots=True)
class Deferred:
    """The tick's budget ran out before this account's fetch ended (or began)."""

    reason: str
    pages: int = 0
    attempts: int = 0
    waited: float = 0.0
    """Seconds of the account's deadline used so far (on this tick and earlier ones)."""


FetchResult = Fetched | FetchFailed | Deferred
Fetcher = Callable[[FetchProgress], Awaitable[Fetched]]
"""One account's whole campaign fetch; raises :class:`FetchFailed`."""


@dataclass(slots=True)
class FetchStats:
    """What the pool is doing now, and did (logged per tick; tests wait on it)."""

    waiting: int = 0
    """Submitted, not yet given a slot."""
    calling: int = 0
    """Holding a slot, their call out."""
    slow: int = 0
    """Calls out longer than the slot time: slot given back, running to their deadline."""
    started: int = 0
    timed_out: int = 0
    deferred: int = 0
    budget_spent: bool = False
    """The tick ended because its budget ran out (some accounts deferred)."""
    admitting: bool = False
    """The tick is still claiming rules and submitting their accounts."""


@dataclass(slots=True)
class _Item:
    label: str
    fetch: Fetcher
    done: asyncio.Future[FetchResult]
    waited: float = 0.0
    """Seconds of its deadline an earlier tick already used (a deferred account)."""


@dataclass(slots=True)
class FetchPool:
    """Runs the tick's account fetches with ``slots`` concurrent normal calls, ``outstanding`` in
    all, each call's own ``deadline`` and, when ``budget`` is given, the tick's overall budget."""

    clock: Clock
    slots: int
    deadline: float
    slot_seconds: float
    budget: float | None = None
    outstanding: int = FETCH_OUTSTANDING
    stats: FetchStats = field(default_factory=FetchStats)
    _free: int = 0
    _pending: deque[_Item] = field(default_factory=deque)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _ends_at: float | None = None
    _budget_timer: asyncio.Task[None] | None = None
    _cancelled: bool = False

    def __post_init__(self) -> None:
        self._free = self.slots
        if self.budget is not None:
            self._ends_at = self.clock.monotonic() + self.budget
            self._budget_timer = asyncio.get_running_loop().create_task(self._spend())

    @property
    def spent(self) -> bool:
        return self.stats.budget_spent

    def remaining(self) -> float | None:
        """Seconds of budget left (None: no budget)."""
        if self._ends_at is None:
            return None
        return max(0.0, self._ends_at - self.clock.monotonic())

    def submit(
        self, label: str, fetch: Fetcher, *, waited: float = 0.0
    ) -> asyncio.Future[FetchResult]:
        """Queue one account's fetch; the future gives its result (never raises). ``waited``:
        seconds of its deadline earlier ticks used — the deadline covers the account's whole
        fetch (spec AR-12a), however many ticks it spans."""
        done: asyncio.Future[FetchResult] = asyncio.get_running_loop().create_future()
        if self.spent:
            self.stats.deferred += 1
            done.set_result(
                Deferred(f"{DEFERRED_REASON} before this account was reached", waited=waited)
            )
            return done
        self._pending.append(_Item(label, fetch, done, waited))
        self.stats.waiting += 1
        self._pump()
        return done

    def cancel(self) -> None:
        """The tick itself was cancelled (its lease lost, the process stopping): stop every
        fetch now rather than at its deadline."""
        self._cancelled = True
        if self._budget_timer is not None:
            self._budget_timer.cancel()
        while self._pending:
            item = self._pending.popleft()
            self.stats.waiting -= 1
            _resolve(item, Deferred(STOPPED_REASON))
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        """Stop the budget's timer and wait for the fetches still running (none once every
        submitted future is done)."""
        if self._budget_timer is not None:
            self._budget_timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._budget_timer
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- admission -----------------------------------------------------------------------------

    def _pump(self) -> None:
        """Start the next accounts while a slot is free (synchronously: counts stay exact)."""
        while (
            self._pending
            and self._free > 0
            and self.stats.calling + self.stats.slow < self.outstanding
            and not self.spent
            and not self._cancelled
        ):
            item = self._pending.popleft()
            self.stats.waiting -= 1
            self.stats.calling += 1
            self.stats.started += 1
            self._free -= 1
            task = asyncio.get_running_loop().create_task(self._run(item))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _give_back(self) -> None:
        self._free += 1
        self._pump()

    async def _spend(self) -> None:
        """When the budget is spent: nothing more starts, the waiting accounts are deferred (the
        running ones defer themselves at their own timer, which the budget bounds)."""
        assert self.budget is not None
        await self.clock.sleep(self.budget)
        self.stats.budget_spent = True
        while self._pending:
            item = self._pending.popleft()
            self.stats.waiting -= 1
            self.stats.deferred += 1
            _resolve(
                item,
                Deferred(f"{DEFERRED_REASON} before this account was reached", waited=item.waited),
            )

    # -- one account -----------------------------------------------------------------------------

    async def _run(self, item: _Item) -> None:
        """The account's fetch against its slot time, its own deadline and the tick's budget."""
        started = self.clock.monotonic()
        if item.waited >= self.deadline:
            # Earlier ticks used the whole deadline: no call, the account is skipped this run.
            _resolve(item, self._cut(False, FetchProgress(), item.waited))
            self.stats.calling -= 1
            self._give_back()
            return
        own_end = started + self.deadline - item.waited
        # The budget bounds every timer: a fetch still out when it is spent is deferred.
        by_budget = self._ends_at is not None and self._ends_at < own_end
        end = self._ends_at if by_budget and self._ends_at is not None else own_end
        progress = FetchProgress()
        fetch = asyncio.ensure_future(item.fetch(progress))
        holding = asyncio.ensure_future(self.clock.sleep(self.slot_seconds))
        timer = asyncio.ensure_future(self.clock.sleep(max(0.0, end - started)))
        in_slot = True
        try:
            while True:
                waits = {fetch, timer} | ({holding} if in_slot else set())
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if fetch in done:
                    _resolve(item, _settled(fetch))
                    return
                if timer in done:
                    fetch.cancel()
                    with contextlib.suppress(BaseException):
                        await fetch
                    waited = item.waited + self.clock.monotonic() - started
                    _resolve(item, self._cut(by_budget, progress, waited))
                    return
                if in_slot and holding in done:
                    # Slower than a normal call: run on to the deadline, but not in a slot.
                    in_slot = False
                    self.stats.calling -= 1
                    self.stats.slow += 1
                    self._give_back()
        finally:
            for waiter in (fetch, holding, timer):
                waiter.cancel()
            if in_slot:
                self.stats.calling -= 1
                self._give_back()
            else:
                self.stats.slow -= 1
                self._pump()
            # Only cancellation of the pool's own task gets here unresolved: say so, not hang.
            _resolve(item, Deferred(STOPPED_REASON))

    def _cut(self, by_budget: bool, progress: FetchProgress, waited: float) -> FetchResult:
        if by_budget:
            self.stats.deferred += 1
            return Deferred(
                f"{DEFERRED_REASON} while the campaign list was still arriving (after "
                f"{waited:.1f} s of its {self.deadline:g} s, {progress.pages} page(s) and "
                f"{progress.attempts} request(s)); it is fetched first on the next tick, with "
                "the rest of its deadline",
                pages=progress.pages,
                attempts=progress.attempts,
                waited=waited,
            )
        self.stats.timed_out += 1
        error = MetaError(
            f"the campaign list did not arrive within {self.deadline:g} s "
            f"(after {progress.pages} page(s) and {progress.attempts} request(s)); "
            "the account is skipped this run so other rules are not held up",
            transient=True,
        )
        return FetchFailed(error, attempts=progress.attempts, pages=progress.pages)


def _resolve(item: _Item, result: FetchResult) -> None:
    """Give the account's result to whoever still waits for it (the first result stands; a
    cancelled waiter — its tick stopped — wants none)."""
    if not item.done.done():
        item.done.set_result(result)


def _settled(fetch: asyncio.Future[Fetched]) -> FetchResult:
    error = fetch.exception()
    if error is None:
        return fetch.result()
    if isinstance(error, FetchFailed):
        return error
    # A defect (an unexpected reply shape the decoder let through): this account is skipped and
    # said so, the tick goes on.
    return FetchFailed(
        MetaError(f"the campaign list could not be read ({type(error).__name__})", transient=False),
        attempts=0,
        pages=0,
    )
