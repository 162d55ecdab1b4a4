"""Periodic sweeps: every 10 seconds, and hourly at minute 20 UTC.

A tick is claimed in the database (:mod:`app.scheduling.ticks`), so it runs once across all
processes and never overlaps the previous tick, even when that one runs long in another process.
The claim is short (``SWEEP_LEASE_SECONDS``, 15 s) and renewed every third of it while the tick
runs; a tick whose lease cannot be renewed is cancelled, so a process that lost its claim stops.

**Takeover.** When a process finds a tick held by another one, it tries again as soon as that
lease expires: after a SIGKILL the survivor (or the restarted process) runs the latest due tick
within one lease. A tick whose runner died is run again only while it is still the latest tick —
so a 10-second tick is never run twice (the lease outlasts the interval) while a missed hourly tick
is run once by the survivor; work a tick creates is keyed by the tick (:func:`tick_key`), so a
re-run enqueues nothing new. At start a process also runs the latest tick of a sweep that missed it
while no process ran. Ticks missed while this process ran a slow tick are skipped, not replayed.

**Supervision.** Every exception in a tick — claiming, running, renewing or finishing it — is
logged with its traceback and counted, and the loop goes on; a tick that failed because the job
queue's broker is down is counted and recorded without one (the queue logs the outage once). :func:`stale_sweeps` names the sweeps
without a successful tick within three intervals (readiness, dashboard, ``sweepline_sweep_stale``).

**Nominal time.** The tick function gets the tick's scheduled time, also set as ``ctx.tick`` on its
job context: due-time comparisons use it, not the wall clock a few milliseconds later, so an item
due exactly at a tick is taken by that tick.

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

from app import telemetry
from app.db.session_kinds import SWEEP, set_session_kind
from app.logs import correlate
from app.scheduling.claim import Lease
from app.scheduling.metrics import (
    SWEEP_DURATION,
    SWEEP_FAILURES,
    SWEEP_LAG,
    SWEEP_LOOP_ERRORS,
    SWEEP_STALE,
    SWEEP_TICKS,
)
from app.scheduling.ticks import (
    ON_TIME,
    TickOutcome,
    claim_tick,
    finish_tick,
    lease_holder,
    sweeper_states,
)
from app.scheduling.unavailable import QueueUnavailable

__all__ = [
    "EVERY_10_SECONDS",
    "HOURLY_AT_20",
    "Every",
    "HourlyAt",
    "Sweep",
    "SweepRunner",
    "stale_sweeps",
    "sweeper_states",
    "tick_key",
]

if TYPE_CHECKING:
    from app.clock import Clock
    from app.db.session import Database
    from app.scheduling.jobs import JobContext
    from app.scheduling.models import SweeperState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Every:
    """Ticks at every multiple of ``seconds`` since the Unix epoch (UTC)."""

    seconds: int

    def next_tick(self, after: datetime) -> datetime:
        epoch = int(after.timestamp())
        return datetime.fromtimestamp((epoch // self.seconds + 1) * self.seconds, UTC)

    def latest_tick(self, at: datetime) -> datetime:
        """The newest tick at or before ``at``."""
        epoch = int(at.timestamp())
        return datetime.fromtimestamp(epoch // self.seconds * self.seconds, UTC)

    @property
    def interval_seconds(self) -> float:
        return float(self.seconds)

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

    def latest_tick(self, at: datetime) -> datetime:
        """The newest tick at or before ``at``."""
        at = at.astimezone(UTC)
        candidate = at.replace(minute=self.minute, second=0, microsecond=0)
        if candidate > at:
            candidate -= timedelta(hours=1)
        return candidate

    @property
    def interval_seconds(self) -> float:
        return 3600.0

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


STALE_AFTER_INTERVALS = 3
"""A sweep without a successful tick for this many intervals is reported stale."""

FINISH_ATTEMPTS = 3
"""Recording a tick's end is tried this often (with a short pause) before it is given up."""


def stale_sweeps(
    sweeps: list[Sweep], states: list[SweeperState], now: datetime, since: datetime | None
) -> list[str]:
    """Names of the sweeps that completed no tick without an error within three intervals.

    ``since`` is when this process started sweeping: a sweep is given three intervals from then
    before it counts as stale (its previous success may predate a long stop). Without it (a
    process that does not sweep) a sweep that never succeeded is not judged.
    """
    succeeded = {s.name: s.last_succeeded_at for s in states}
    stale = []
    for sweep in sweeps:
        last = succeeded.get(sweep.name)
        known = [t for t in (last, since) if t is not None]
        if not known:
            continue
        reference = max(known)
        limit = timedelta(seconds=STALE_AFTER_INTERVALS * sweep.schedule.interval_seconds)
        is_stale = now - reference > limit
        SWEEP_STALE.labels(sweep.name).set(1 if is_stale else 0)
        if is_stale:
            stale.append(sweep.name)
    return stale


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
        lease_seconds: float,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.db = db
        self.clock = clock
        self.sweeps = sweeps
        self.make_context = make_context
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.platform_stopped = stopped
        self.started_at = clock.now()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.running: set[str] = set()
        """Sweeps whose tick is running in this process now."""
        self._finished: dict[str, datetime] = {}
        """The newest tick of each sweep this process ran to its end (even if recording failed)."""

    async def run(self) -> None:
        # The ticks' sessions are sweep sessions (app/db/session_kinds.py): shorter lock waits.
        set_session_kind(SWEEP)
        self.started_at = self.clock.now()
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

    @property
    def stopping(self) -> bool:
        """Stopped (:meth:`stop` or :meth:`shutdown`): no new tick starts."""
        return self._stop.is_set()

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

    async def stale(self) -> list[str]:
        """The sweeps of this runner without a successful tick within three intervals."""
        return stale_sweeps(
            self.sweeps, await sweeper_states(self.db), self.clock.now(), self.started_at
        )

    async def _loop(self, sweep: Sweep) -> None:
        # At start, a tick missed while no process ran (or whose runner died) is run once.
        retry = True
        while not self._stop.is_set():
            try:
                if retry:
                    latest = sweep.schedule.latest_tick(self.clock.now())
                    retry = await self._attempt(sweep, latest, catch_up=True)
                tick = sweep.schedule.next_tick(self.clock.now())
                wake = tick
                if retry:
                    wake = min(tick, await self._retry_at(sweep, tick))
                if not await self._sleep_until(wake):
                    return
                if wake == tick:
                    retry = await self._attempt(sweep, tick)
            except Exception:
                # Nothing may end this loop but a stop: log, count, go on at the next tick.
                log.exception("sweep %s: the tick loop failed; going on", sweep.name)
                SWEEP_LOOP_ERRORS.labels(sweep.name).inc()
                retry = False
                if not await self._sleep_until(self.clock.now() + timedelta(seconds=1)):
                    return

    async def _attempt(self, sweep: Sweep, tick: datetime, *, catch_up: bool = False) -> bool:
        """Try to run ``tick``; True when another process holds the sweep (try again when its
        lease expires)."""
        if self._finished.get(sweep.name, _NEVER) >= tick:
            return False
        now = self.clock.now()
        try:
            claimed = await claim_tick(
                self.db, sweep.name, tick, self.owner, now, self.lease_seconds, catch_up=catch_up
            )
        except Exception:
            # A locked database: the next tick (or the retry) tries again.
            log.exception("could not claim tick %s of %s", tick.isoformat(), sweep.name)
            SWEEP_LOOP_ERRORS.labels(sweep.name).inc()
            return False
        if not claimed:
            holder, until = await lease_holder(self.db, sweep.name)
            return holder not in (None, self.owner) and until is not None and until > now
        await self._run_claimed_tick(sweep, tick, now)
        return False

    async def _retry_at(self, sweep: Sweep, fallback: datetime) -> datetime:
        """Just after the other holder's lease expires (``fallback`` when it is free)."""
        try:
            _, until = await lease_holder(self.db, sweep.name)
        except Exception:
            log.exception("could not read the claim of %s", sweep.name)
            return fallback
        if until is None:
            return fallback
        return max(self.clock.now(), until) + timedelta(milliseconds=50)

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
            SWEEP_LOOP_ERRORS.labels(sweep.name).inc()
            return False
        if not claimed:
            return False
        await self._run_claimed_tick(sweep, tick, now)
        return True

    async def _run_claimed_tick(self, sweep: Sweep, tick: datetime, now: datetime) -> None:
        if sweep.honours_stop and self.platform_stopped():
            log.info("sweep %s skipped: platform stop is on", sweep.name)
            SWEEP_LAG.labels(sweep.name).set(max(0.0, (now - tick).total_seconds()))
            await self._finish(sweep, tick, TickOutcome(0, None))
            return
        with (
            correlate(f"{sweep.name}@{tick.astimezone(UTC).isoformat()}"),
            telemetry.span(
                f"sweep {sweep.name}",
                attributes=lambda: {
                    "sweepline.sweep.name": sweep.name,
                    "sweepline.sweep.tick": tick.astimezone(UTC).isoformat(),
                    "sweepline.sweep.lag_ms": int((now - tick).total_seconds() * 1000),
                },
            ),
        ):
            await self._run_claimed(sweep, tick, now)

    async def _run_claimed(self, sweep: Sweep, tick: datetime, started_at: datetime) -> None:
        started = self.clock.monotonic()
        error: str | None = None
        oldest_due: datetime | None = None
        ctx = self.make_context()
        ctx.tick = tick
        work = asyncio.ensure_future(sweep.run(ctx, tick))
        lost: list[bool] = []

        def on_lost(_: set[Any]) -> None:
            lost.append(True)
            work.cancel()

        heartbeat = Lease(
            ON_TIME,
            self.db,
            self.clock,
            owner=self.owner,
            keys=[sweep.name],
            lease_seconds=self.lease_seconds,
            claimed_at=started_at,
            on_lost=on_lost,
            params={"tick": tick},
        )
        self.running.add(sweep.name)
        try:
            async with heartbeat:
                oldest_due = await work
        except asyncio.CancelledError:
            if not lost:
                error = "cancelled during shutdown"
                work.cancel()
                await self._record(sweep, tick, started, started_at, error, oldest_due)
                raise
            error = "lease lost: another process may run this sweep now"
            log.error("sweep %s lost its claim of tick %s; stopped", sweep.name, tick.isoformat())
            SWEEP_FAILURES.labels(sweep.name).inc()
        except QueueUnavailable as exc:
            # The queue logs the outage once; a traceback for every sweep's every tick until
            # Redis is back would bury it. The tick's row and the failure count still say so.
            error = f"{type(exc).__name__}: {exc}"
            SWEEP_FAILURES.labels(sweep.name).inc()
            log.debug("sweep %s failed at tick %s: %s", sweep.name, tick.isoformat(), exc)
        except Exception as exc:
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            SWEEP_FAILURES.labels(sweep.name).inc()
            log.exception("sweep %s failed at tick %s", sweep.name, tick.isoformat())
        finally:
            self.running.discard(sweep.name)
        if not lost:
            await self._record(sweep, tick, started, started_at, error, oldest_due)

    async def _record(
        self,
        sweep: Sweep,
        tick: datetime,
        started: float,
        started_at: datetime,
        error: str | None,
        oldest_due: datetime | None,
    ) -> None:
        elapsed = self.clock.monotonic() - started
        lag = max(0.0, (started_at - min(tick, oldest_due or tick)).total_seconds())
        SWEEP_DURATION.labels(sweep.name).observe(elapsed)
        SWEEP_LAG.labels(sweep.name).set(lag)
        SWEEP_TICKS.labels(sweep.name).inc()
        outcome = TickOutcome(
            int(elapsed * 1000), error, int(lag * 1000) if oldest_due is not None else None
        )
        if error is not None:
            telemetry.fail_current(error)  # the tick's span (the error was caught above)
        # Shielded: a tick cancelled at shutdown still releases its claim.
        await asyncio.shield(self._finish(sweep, tick, outcome))
        log.info(
            "sweep tick",
            extra={
                "sweep": sweep.name,
                "tick": tick.isoformat(),
                "duration_ms": outcome.duration_ms,
                "lag_ms": int(lag * 1000),
                "error": error,
            },
        )

    async def _finish(self, sweep: Sweep, tick: datetime, outcome: TickOutcome) -> None:
        """Record the tick's end; failures are logged and counted, never raised (the tick ran:
        this process will not run it again, and its claim expires on its own)."""
        self._finished[sweep.name] = max(tick, self._finished.get(sweep.name, _NEVER))
        for attempt in range(1, FINISH_ATTEMPTS + 1):
            try:
                await finish_tick(self.db, sweep.name, tick, self.owner, self.clock.now(), outcome)
                return
            except Exception:
                if attempt == FINISH_ATTEMPTS:
                    log.exception(
                        "sweep %s: could not record the end of tick %s",
                        sweep.name,
                        tick.isoformat(),
                    )
                    SWEEP_LOOP_ERRORS.labels(sweep.name).inc()
                    return
                await asyncio.sleep(0.2 * attempt)


_NEVER = datetime.min.replace(tzinfo=UTC)
