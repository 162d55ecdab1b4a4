"""Periodic sweeps: every 10 seconds, and hourly at minute 20 UTC.

A tick is claimed in the database with one conditional ``UPDATE`` on the sweep's state row: it
succeeds only when the tick is newer than the last one claimed *and* no other claim is still leased.
So a tick runs once across all processes, and never overlaps the previous tick, even when that one
runs long in another process. Within a process the loop is sequential; ticks missed while a slow
tick ran are skipped, not replayed. Work a tick creates should be keyed by the tick (:func:`tick_key`)
so a repeated tick enqueues nothing new.

Lag is "now − oldest due": a tick function may return the due time of the oldest item it found (a
rule, a step, a schedule that should have run by then); otherwise the tick's own scheduled time is the
oldest due thing, and the lag is how late the tick started.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import or_, select, update

from app.logs import correlate
from app.scheduling.metrics import SWEEP_DURATION, SWEEP_FAILURES, SWEEP_LAG, SWEEP_TICKS
from app.scheduling.models import SweeperState

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database
    from app.scheduling.jobs import JobContext

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Every:
    """Ticks at every multiple of ``seconds`` since the Unix epoch (UTC)."""

    seconds: int

    def next_tick(self, after: datetime) -> datetime:
        epoch = int(after.timestamp())
        return datetime.fromtimestamp((epoch // self.seconds + 1) * self.seconds, UTC)

    def describe(self) -> str:
        return f"every {self.seconds} s"


@dataclass(frozen=True, slots=True)
class HourlyAt:
    """Ticks once an hour at ``minute`` past the hour, UTC."""

    minute: int

    def next_tick(self, after: datetime) -> datetime:
        after = after.astimezone(UTC)
        candidate = after.replace(minute=self.minute, second=0, microsecond=0)
        if candidate <= after:
            candidate += timedelta(hours=1)
        return candidate

    def describe(self) -> str:
        return f"hourly at :{self.minute:02d} UTC"


Schedule = Every | HourlyAt
EVERY_10_SECONDS = Every(10)
HOURLY_AT_20 = HourlyAt(20)

TickFunction = Callable[["JobContext", datetime], Awaitable[datetime | None]]
"""Called with a job context and the tick's scheduled time; may return the oldest due time it saw."""


@dataclass(frozen=True, slots=True)
class Sweep:
    name: str
    schedule: Schedule
    run: TickFunction
    """Called with a job context and the tick's scheduled time; may return the oldest due time."""
    honours_stop: bool = True
    """Skip the tick while the platform-wide stop is on (housekeeping sweeps set False)."""


def tick_key(kind: str, entity_id: object, tick: datetime) -> str:
    """The job id of work created by a tick: the same tick never enqueues the same work twice."""
    return f"{kind}:{entity_id}:{tick.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}"


async def claim_tick(
    db: Database, name: str, tick: datetime, owner: str, now: datetime, lease_seconds: int
) -> bool:
    """Claim ``tick`` of sweep ``name`` for ``owner``; True when this caller runs it."""
    async with db.write() as uow:
        await uow.session.execute(
            insert_ignoring_duplicates_state(db.dialect),
            [{"name": name, "ticks": 0, "failures": 0}],
        )
        result = await uow.session.execute(
            update(SweeperState)
            .where(
                SweeperState.name == name,
                or_(SweeperState.last_tick_at.is_(None), SweeperState.last_tick_at < tick),
                or_(SweeperState.lease_until.is_(None), SweeperState.lease_until < now),
            )
            .values(
                last_tick_at=tick,
                lease_owner=owner,
                lease_until=now + timedelta(seconds=lease_seconds),
                last_started_at=now,
                last_lag_ms=int((now - tick).total_seconds() * 1000),
            )
        )
        return bool(getattr(result, "rowcount", 0))


def insert_ignoring_duplicates_state(dialect: str) -> Any:
    from sqlalchemy.dialects import postgresql, sqlite

    module = postgresql if dialect == "postgresql" else sqlite
    return module.insert(SweeperState).on_conflict_do_nothing(index_elements=["name"])


async def finish_tick(
    db: Database,
    name: str,
    owner: str,
    now: datetime,
    duration_ms: int,
    error: str | None,
    lag_ms: int | None = None,
) -> None:
    """Record how the tick went and release its claim (``lag_ms`` replaces the start lag)."""
    values: dict[str, Any] = {
        "lease_until": None,
        "last_finished_at": now,
        "last_duration_ms": duration_ms,
        "last_error": error,
        "ticks": SweeperState.ticks + 1,
        "failures": SweeperState.failures + (1 if error else 0),
    }
    if lag_ms is not None:
        values["last_lag_ms"] = lag_ms
    async with db.write() as uow:
        await uow.session.execute(
            update(SweeperState)
            .where(SweeperState.name == name, SweeperState.lease_owner == owner)
            .values(**values)
        )


async def sweeper_states(db: Database) -> list[SweeperState]:
    async with db.read() as session:
        return list(
            (await session.execute(select(SweeperState).order_by(SweeperState.name))).scalars()
        )


class SweepRunner:
    """Runs each registered sweep on its schedule until stopped."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        sweeps: list[Sweep],
        make_context: Callable[[], JobContext],
        *,
        owner: str,
        lease_seconds: int,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.db = db
        self.clock = clock
        self.sweeps = sweeps
        self.make_context = make_context
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.platform_stopped = stopped
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        self._tasks = [
            asyncio.create_task(self._loop(s), name=f"sweep:{s.name}") for s in self.sweeps
        ]
        try:
            await asyncio.gather(*self._tasks)
        except asyncio.CancelledError:
            for task in self._tasks:
                task.cancel()
            raise

    def stop(self) -> None:
        """No new ticks; a tick already running finishes (see :meth:`shutdown`)."""
        self._stop.set()

    async def shutdown(self, grace: float) -> None:
        """Stop, give running ticks ``grace`` seconds, then cancel them (their claim is
        released and the next tick picks up where they left off)."""
        self.stop()
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _loop(self, sweep: Sweep) -> None:
        while not self._stop.is_set():
            tick = sweep.schedule.next_tick(self.clock.now())
            if not await self._sleep_until(tick):
                return
            await self.run_tick(sweep, tick)

    async def _sleep_until(self, when: datetime) -> bool:
        """Sleep on the clock until ``when``; False when stopped first."""
        sleeper = asyncio.ensure_future(self.clock.sleep((when - self.clock.now()).total_seconds()))
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            stopper.cancel()
        return not self._stop.is_set()

    async def run_tick(self, sweep: Sweep, tick: datetime) -> bool:
        """Claim and run one tick. Returns False when another process (or tick) holds it."""
        now = self.clock.now()
        try:
            claimed = await claim_tick(
                self.db, sweep.name, tick, self.owner, now, self.lease_seconds
            )
        except Exception:
            log.exception("could not claim tick %s of %s", tick.isoformat(), sweep.name)
            return False
        if not claimed:
            return False
        if sweep.honours_stop and self.platform_stopped():
            log.info("sweep %s skipped: platform stop is on", sweep.name)
            SWEEP_LAG.labels(sweep.name).set(max(0.0, (now - tick).total_seconds()))
            await finish_tick(self.db, sweep.name, self.owner, self.clock.now(), 0, None)
            return True
        with correlate(f"{sweep.name}@{tick.astimezone(UTC).isoformat()}"):
            await self._run_claimed(sweep, tick, now)
        return True

    async def _run_claimed(self, sweep: Sweep, tick: datetime, started_at: datetime) -> None:
        started = self.clock.monotonic()
        error: str | None = None
        oldest_due: datetime | None = None
        try:
            oldest_due = await sweep.run(self.make_context(), tick)
        except asyncio.CancelledError:
            error = "cancelled during shutdown"
            raise
        except Exception as exc:
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            SWEEP_FAILURES.labels(sweep.name).inc()
            log.exception("sweep %s failed at tick %s", sweep.name, tick.isoformat())
        finally:
            elapsed = self.clock.monotonic() - started
            lag = (started_at - min(tick, oldest_due or tick)).total_seconds()
            SWEEP_DURATION.labels(sweep.name).observe(elapsed)
            SWEEP_LAG.labels(sweep.name).set(max(0.0, lag))
            SWEEP_TICKS.labels(sweep.name).inc()
            # Shielded: a tick cancelled at shutdown still releases its claim.
            await asyncio.shield(
                finish_tick(
                    self.db,
                    sweep.name,
                    self.owner,
                    self.clock.now(),
                    int(elapsed * 1000),
                    error,
                    int(max(0.0, lag) * 1000) if oldest_due is not None else None,
                )
            )
            log.info(
                "sweep tick",
                extra={
                    "sweep": sweep.name,
                    "tick": tick.isoformat(),
                    "duration_ms": int(elapsed * 1000),
                    "lag_ms": int(max(0.0, lag) * 1000),
                    "error": error,
                },
            )
