"""Creating a schedule (RT-1 to RT-17 rules) and requesting its first baseline through admission
(RT-27), either after the schedule is saved or in the same unit of work."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.db.session import UnitOfWork, WriteSession
from app.engines.ranktracking.claim.admission import BASELINE, Launch
from app.engines.ranktracking.claim.handoff import PendingLaunch, admit_and_send, admit_within
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.due import first_due
from app.engines.ranktracking.errors import ScheduleLimitReached
from app.engines.ranktracking.location_sync import ensure_known
from app.engines.ranktracking.models import ACTIVE, SCHEDULES, Schedule
from app.engines.ranktracking.pricing import STANDARD
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.schedules.config import (
    checked_keyword_count,
    checked_location,
    config_of,
)
from app.engines.ranktracking.schedules.duplicates import (
    flush_refusing_duplicates,
    refuse_duplicate,
)
from app.engines.ranktracking.schedules.lookup import get_schedule, live_count
from app.engines.ranktracking.schedules.rules import dedup_key
from app.engines.ranktracking.schemas import RankScheduleIn
from app.platform.models import Workspace
from app.platform.service import Principal
from app.settings import RankTrackingSettings


async def create(
    session: WriteSession,
    rt: RankTrackingSettings,
    principal: Principal,
    data: RankScheduleIn,
    now: datetime,
) -> Schedule:
    """Save a schedule (RT-1 to RT-17 rules). The caller then requests the baseline."""
    config = config_of(data, rt)
    await checked_location(session, config.location_code)
    # Serialise creations per workspace so two at once cannot both pass the limit.
    await session.execute(
        select(Workspace.id).where(Workspace.id == principal.workspace_id).with_for_update()
    )
    await checked_keyword_count(session, principal.workspace_id, config, rt)
    if await live_count(session, principal.workspace_id) >= rt.max_active_schedules:
        raise ScheduleLimitReached(
            f"this workspace already has {rt.max_active_schedules} active or paused schedules; "
            "end one first"
        )
    key = dedup_key(config)
    await refuse_duplicate(session, principal.workspace_id, key, None)
    schedule = Schedule(
        workspace_id=principal.workspace_id,
        organisation_id=principal.organisation_id,
        owner_user_id=principal.user_id,
        name=config.name,
        list_id=config.list_id,
        keywords=config.keywords,
        data_type=config.data_type,
        frequency=config.frequency,
        depth=config.depth,
        location_code=config.location_code,
        language_code=config.language_code,
        domain=config.domain,
        devices=config.devices_text,
        packages=config.packages or None,
        monthly_cap_cents=config.monthly_cap_cents,
        **SCHEDULES.create(ACTIVE),
        dedup_key=key,
        anchor_at=now,
        next_due_at=first_due(now, config.frequency),
        retrying=False,
        consecutive_blocks=0,
        consecutive_failures=0,
        created_at=now,
        updated_at=now,
    )
    session.add(schedule)
    await flush_refusing_duplicates(session)
    activity.record_schedule_change(
        session,
        schedule,
        kind=activity.SCHEDULE_CREATED,
        change=f"created ({schedule.data_type}, {schedule.frequency})",
        now=now,
    )
    return schedule


async def create_and_baseline(
    deps: RankTrackingDeps, principal: Principal, data: RankScheduleIn
) -> tuple[Schedule, Launch]:
    """RT-27: save the schedule, then request its first baseline through admission. Creation
    stands even when the baseline is skipped or fails; the outcome is returned explicitly."""
    await ensure_known(deps, data.location_code)
    now = deps.clock.now()
    async with deps.db.write() as uow:
        schedule = await create(uow.session, deps.settings.ranktracking, principal, data, now)
    launch = await admit_and_send(deps, schedule.id, trigger=BASELINE, queue=STANDARD, now=now)
    async with deps.db.read() as session:
        schedule = await get_schedule(session, principal.workspace_id, schedule.id)
    return schedule, launch


async def create_with_baseline_in(
    uow: UnitOfWork, deps: RankTrackingDeps, principal: Principal, data: RankScheduleIn
) -> tuple[Schedule, PendingLaunch]:
    """RT-27 in one unit of work (the API's retryable creation): the schedule and its baseline
    request commit together, so a retry with the same ``Idempotency-Key`` finds both or neither.
    The caller hands the baseline off once that unit of work has committed
    (:meth:`PendingLaunch.hand_off`) and reports what that did."""
    now = deps.clock.now()
    schedule = await create(uow.session, deps.settings.ranktracking, principal, data, now)
    launch = await admit_within(uow, deps, schedule.id, trigger=BASELINE, queue=STANDARD, now=now)
    return schedule, launch
