"""Pausing, resuming and ending a schedule (RT-28, RT-29). Pausing or ending closes the
schedule's active runs and releases their reservations; ending keeps the history."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.db.session import WriteSession
from app.engines.ranktracking import ledger
from app.engines.ranktracking.errors import ScheduleStateConflict
from app.engines.ranktracking.models import (
    ACTIVE,
    ACTIVE_RUN_STATUSES,
    ARCHIVED,
    CANCELLED,
    FAILED,
    PAUSED_USER,
    Run,
    Schedule,
)
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.run_states import RUNS
from app.engines.ranktracking.schedules.states import SCHEDULES
from app.engines.ranktracking.wording import counted
from app.platform import audit


async def close_active_runs(
    session: WriteSession, schedule: Schedule, *, code: str, message: str, now: datetime
) -> int:
    """Close the schedule's active child runs as failed and release their reservations."""
    runs = list(
        (
            await session.execute(
                select(Run)
                .where(Run.schedule_id == schedule.id, Run.status.in_(ACTIVE_RUN_STATUSES))
                .with_for_update()
                .execution_options(populate_existing=True)
            )
        ).scalars()
    )
    for run in runs:
        RUNS.move(run, FAILED)
        run.error_code, run.error_message = code, message
        run.finished_at = run.updated_at = now
        await ledger.release(
            session,
            run,
            organisation_id=schedule.organisation_id,
            now=now,
            note=f"run {run.id} {code}",
        )
    return len(runs)


async def pause(session: WriteSession, schedule: Schedule, now: datetime) -> Schedule:
    """RT-28: ``paused_user``; active runs closed as cancelled, reservations released."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be paused")
    if schedule.status == PAUSED_USER:
        return schedule
    before = schedule.status
    SCHEDULES.move(schedule, PAUSED_USER)
    schedule.updated_at = now
    await _cancel_runs_and_record(session, schedule, "paused", activity.SCHEDULE_PAUSED, now)
    await _audit(session, "rank_schedule.paused", schedule, before, now)
    return schedule


async def _audit(
    session: WriteSession, action: str, schedule: Schedule, before: str, now: datetime
) -> None:
    await audit.record(
        session,
        action=action,
        object_type="rank_schedule",
        object_id=schedule.id,
        workspace_id=schedule.workspace_id,
        organisation_id=schedule.organisation_id,
        before={"status": before},
        after={"status": schedule.status},
        now=now,
    )


async def _cancel_runs_and_record(
    session: WriteSession, schedule: Schedule, verb: str, kind: str, now: datetime
) -> None:
    """Close the schedule's active runs as cancelled (releasing their reservations) and leave
    the pause or end in the activity feed."""
    closed = await close_active_runs(
        session, schedule, code=CANCELLED, message=f"cancelled: the schedule was {verb}", now=now
    )
    activity.record_schedule_change(
        session,
        schedule,
        kind=kind,
        change=verb + (f"; {counted(closed, 'active run')} cancelled" if closed else ""),
        now=now,
    )


async def resume(session: WriteSession, schedule: Schedule, now: datetime) -> Schedule:
    """RT-28: active again, failures cleared, due immediately; the cancelled gap is not refilled."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be resumed")
    if schedule.status == ACTIVE:
        return schedule
    before = schedule.status
    SCHEDULES.move(schedule, ACTIVE)
    schedule.consecutive_failures = 0
    schedule.consecutive_blocks = 0
    schedule.anchor_at = now
    schedule.next_due_at = now
    schedule.retrying = False
    schedule.updated_at = now
    activity.record_schedule_change(
        session,
        schedule,
        kind=activity.SCHEDULE_RESUMED,
        change="resumed; due at the next hourly sweep",
        now=now,
    )
    await _audit(session, "rank_schedule.resumed", schedule, before, now)
    return schedule


async def end(session: WriteSession, schedule: Schedule, now: datetime) -> Schedule:
    """RT-29: archived for good; active runs closed, reservations released, history kept."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("the schedule has already ended")
    before = schedule.status
    SCHEDULES.move(schedule, ARCHIVED)
    schedule.archived_at = now
    schedule.updated_at = now
    await _cancel_runs_and_record(session, schedule, "ended", activity.SCHEDULE_ENDED, now)
    await _audit(session, "rank_schedule.ended", schedule, before, now)
    return schedule
