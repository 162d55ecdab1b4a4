"""The workspace activity feed (RT-39): one row per thing a person checks before retrying."""

from __future__ import annotations

from datetime import datetime

from app.db import keyset
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.ranktracking.models import Activity, Run, Schedule

# Kinds of feed rows.
SCHEDULE_CREATED = "schedule_created"
SCHEDULE_EDITED = "schedule_edited"
SCHEDULE_PAUSED = "schedule_paused"
SCHEDULE_RESUMED = "schedule_resumed"
SCHEDULE_ENDED = "schedule_ended"
RUN_SKIPPED = "run_skipped"
RUN_FAILED = "run_failed"
RUN_SETTLED = "run_settled"
PAUSE_NOTICE = "pause_notice"
TOPUP = "topup"
RECONCILIATION = "reconciliation"


def record(
    session: WriteSession,
    *,
    workspace_id: int,
    kind: str,
    message: str,
    now: datetime,
    schedule_id: int | None = None,
    run_id: int | None = None,
    code: str | None = None,
) -> Activity:
    row = Activity(
        workspace_id=workspace_id,
        schedule_id=schedule_id,
        run_id=run_id,
        kind=kind,
        code=code,
        message=message,
        created_at=now,
    )
    session.add(row)
    return row


def record_schedule_change(
    session: WriteSession, schedule: Schedule, *, kind: str, change: str, now: datetime
) -> Activity:
    """A schedule's own entry (created, edited, paused, resumed, ended): ``change`` follows the
    schedule's quoted name as it is now (``"Shoes" paused``)."""
    return record(
        session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=kind,
        message=f'"{schedule.name}" {change}',
        now=now,
    )


def run_label(run: Run) -> str:
    """How the feed names a run: its id and its device (its data type when it has none)."""
    return f"run {run.id} ({run.device or run.data_type})"


def record_run_outcome(
    session: WriteSession,
    run: Run,
    *,
    kind: str,
    message: str,
    now: datetime,
    code: str | None = None,
) -> Activity:
    """An entry about how ``run`` ended (settled, failed, billed above the charge)."""
    return record(
        session,
        workspace_id=run.workspace_id,
        schedule_id=run.schedule_id,
        run_id=run.id,
        kind=kind,
        code=code,
        message=message,
        now=now,
    )


async def feed(
    session: ReadSession,
    workspace_id: int,
    *,
    limit: int = 50,
    before_id: int | None = None,
    schedule_id: int | None = None,
) -> list[Activity]:
    """Newest first; fetches ``limit`` rows (callers ask for one more to know if there is more)."""
    stmt = scoped_select(Activity, workspace_id)
    if before_id is not None:
        stmt = stmt.where(keyset.before(Activity.id, before_id))
    if schedule_id is not None:
        stmt = stmt.where(Activity.schedule_id == schedule_id)
    rows = await session.execute(stmt.order_by(Activity.id.desc()).limit(limit))
    return list(rows.scalars())
