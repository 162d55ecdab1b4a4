"""Manual requests (RT-25, RT-26): "run now" on the standard queue, or "measure quickly" on the
priority queue (SERP only), admitted like any other request."""

from __future__ import annotations

from app.db.session import UnitOfWork
from app.engines.ranktracking.claim.admission import MANUAL, Launch
from app.engines.ranktracking.claim.handoff import PendingLaunch, admit_and_send, admit_within
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.schedules.lookup import get_schedule
from app.engines.ranktracking.schedules.rules import check_queue
from app.platform.service import Principal


async def run_now(
    deps: RankTrackingDeps, principal: Principal, schedule_id: int, queue: str
) -> Launch:
    """RT-25/26: a manual request on the standard queue, or "measure quickly" on the priority
    queue (SERP only)."""
    async with deps.db.read() as session:
        schedule = await get_schedule(session, principal.workspace_id, schedule_id)
    check_queue(schedule.data_type, queue)
    return await admit_and_send(
        deps, schedule_id, trigger=MANUAL, queue=queue, now=deps.clock.now()
    )


async def run_now_in(
    uow: UnitOfWork, deps: RankTrackingDeps, principal: Principal, schedule_id: int, queue: str
) -> PendingLaunch:
    """:func:`run_now` inside the caller's unit of work (the API's retryable manual request); the
    caller hands it off after the commit (:meth:`PendingLaunch.hand_off`)."""
    schedule = await get_schedule(uow.session, principal.workspace_id, schedule_id)
    check_queue(schedule.data_type, queue)
    return await admit_within(
        uow, deps, schedule_id, trigger=MANUAL, queue=queue, now=deps.clock.now()
    )
