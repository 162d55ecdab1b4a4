"""Reconciliation (RT-24): a periodic sweep that closes what a crash or a lost job left open.

- ``dispatching`` runs older than an hour never reached the worker: ``skipped_dispatch``, released,
  the schedule retries in an hour (RT-31);
- ``running`` runs without progress for ``RT_STALE_AFTER_MINUTES`` are ended from what they have
  (their pending keywords count as missing) and settled;
- a terminal run still holding a reservation has it released.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, select

from app.db.session import ReadSession
from app.engines.ranktracking import ledger
from app.engines.ranktracking.claim.handoff import not_dispatched
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import (
    DISPATCHING,
    RES_HELD,
    RUNNING,
    TERMINAL_RUN_STATUSES,
    Run,
    Schedule,
)
from app.engines.ranktracking.work.run_end import finalize
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import Every, Sweep

log = logging.getLogger(__name__)

DISPATCH_GRACE = timedelta(hours=1)
BATCH = 200


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    undispatched: int
    stale_ended: int
    released: int


async def _run_ids(session: ReadSession, *where: ColumnElement[bool]) -> list[int]:
    """The ids of at most a batch of runs matching ``where``."""
    return list((await session.execute(select(Run.id).where(*where).limit(BATCH))).scalars())


async def reconcile(deps: RankTrackingDeps, now: datetime) -> ReconcileReport:
    stale_after = timedelta(minutes=deps.settings.ranktracking.stale_after_minutes)
    async with deps.db.read() as session:
        lost = await _run_ids(
            session, Run.status == DISPATCHING, Run.updated_at < now - DISPATCH_GRACE
        )
        stale = await _run_ids(session, Run.status == RUNNING, Run.updated_at < now - stale_after)
        open_ids = await _run_ids(
            session, Run.reservation_state == RES_HELD, Run.status.in_(TERMINAL_RUN_STATUSES)
        )
    undispatched = 0
    if lost:
        undispatched = await not_dispatched(
            deps,
            lost,
            code="dispatch_lost",
            message="never reached the worker; retrying in one hour",
            now=now,
        )
    ended = 0
    for run_id in stale:
        async with deps.db.write() as uow:
            run = await uow.session.get(Run, run_id, with_for_update=True, populate_existing=True)
            if run is None or run.status != RUNNING:
                continue
            run.error_code = "stale"
            run.error_message = "no progress from the provider; unanswered keywords are missing"
            await finalize(uow, deps, run, now)
            ended += 1
    released = 0
    for run_id in open_ids:
        async with deps.db.write() as uow:
            run = await uow.session.get(Run, run_id, with_for_update=True, populate_existing=True)
            if run is None:
                continue
            schedule = await uow.session.get(Schedule, run.schedule_id)
            assert schedule is not None
            if await ledger.release(
                uow.session,
                run,
                organisation_id=schedule.organisation_id,
                now=now,
                note=f"run {run.id}: reservation left open, released by reconciliation",
            ):
                released += 1
    if undispatched or ended or released:
        log.warning(
            "position tracking reconciliation closed rows",
            extra={"undispatched": undispatched, "stale_ended": ended, "released": released},
        )
    return ReconcileReport(undispatched, ended, released)


async def reconcile_tick(ctx: JobContext, tick: datetime) -> None:
    await reconcile(RankTrackingDeps.of(ctx), ctx.clock.now())


RECONCILE_SWEEP = Sweep("ranktracking.reconcile", Every(300), reconcile_tick)
