"""What a person reads about a schedule: its API shape, with the label of its next run and its
last group of child runs, and the answer to a request (the child runs it launched or skipped)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.ranktracking import locations
from app.engines.ranktracking.amounts import cents_to_micros, eur_down
from app.engines.ranktracking.claim.admission import Launch
from app.engines.ranktracking.models import ACTIVE, Run, Schedule
from app.engines.ranktracking.records.log import last_group, run_out
from app.engines.ranktracking.schedules.rules import DEPTH_NAMES
from app.engines.ranktracking.schemas import LaunchOut, ScheduleOut


def next_run_label(schedule: Schedule, now: datetime) -> str:
    if schedule.status != ACTIVE:
        return schedule.status
    if schedule.retrying:
        return "retrying"
    if schedule.next_due_at <= now:
        return "pending"
    return "scheduled"


def dropped_warning(location: locations.Location) -> str:
    return (
        f"the provider no longer lists {location.name} ({location.code}); this schedule keeps "
        "running with it, but its results may stop: choose another location"
    )


async def schedule_out(session: ReadSession, schedule: Schedule, now: datetime) -> ScheduleOut:
    location = await locations.shown(session, schedule.location_code)
    cap = schedule.monthly_cap_cents
    cap_micros = cents_to_micros(cap) if cap is not None else None
    return ScheduleOut(
        id=schedule.id,
        name=schedule.name,
        data_type=schedule.data_type,
        frequency=schedule.frequency,
        source="list" if schedule.list_id is not None else "selection",
        list_id=schedule.list_id,
        keywords=list(schedule.keywords) if schedule.keywords is not None else None,
        depth=DEPTH_NAMES.get(schedule.depth) if schedule.depth else None,  # type: ignore[arg-type]
        location_code=schedule.location_code,
        location_name=location.name if location else None,
        location_warning=dropped_warning(location) if location and location.dropped else None,
        language_code=schedule.language_code,
        domain=schedule.domain,
        devices=schedule.device_list,
        packages=list(schedule.packages or []),
        monthly_cap_micros=cap_micros,
        monthly_cap_eur=eur_down(cap_micros) if cap_micros is not None else None,
        status=schedule.status,
        next_due_at=schedule.next_due_at if schedule.status == ACTIVE else None,
        next_run=next_run_label(schedule, now),
        retrying=schedule.retrying,
        consecutive_blocks=schedule.consecutive_blocks,
        created_at=schedule.created_at,
        archived_at=schedule.archived_at,
        last_run=await last_group(session, schedule.id),
    )


async def launch_out(session: ReadSession, launch: Launch) -> LaunchOut:
    """The answer to a request: how many child runs really reached the work queue, why not, and
    the child rows written — launched ones, or the ``skipped_dispatch`` rows of a failed hand-off."""
    runs: list[Run] = []
    shown = launch.run_ids or launch.skipped_run_ids
    if shown:
        runs = list(
            (await session.execute(select(Run).where(Run.id.in_(shown)).order_by(Run.id))).scalars()
        )
    return LaunchOut(
        launched=launch.launched,
        reason=launch.reason,
        code=launch.code,
        message=launch.message,
        request_id=launch.request_id,
        runs=[run_out(r) for r in runs],
    )
