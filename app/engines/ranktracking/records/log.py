"""The schedule log read model (RT-33 to RT-36): groups of child runs, newest first, 50 a page, with
the counters a person reads and the health summary of the last 12 rows."""

from __future__ import annotations

from sqlalchemy import select

from app.db import keyset
from app.db.session import ReadSession
from app.engines.ranktracking.models import (
    ACTIVE_RUN_STATUSES,
    FAILED,
    PARTIAL,
    SKIPPED_BALANCE,
    SKIPPED_DISPATCH,
    SUCCEEDED,
    Request,
    Run,
)
from app.engines.ranktracking.schemas import GroupOut, HealthPoint, LogOut, RankRunOut

PAGE_SIZE = 50
HEALTH_ROWS = 12


def shown_status(run: Run) -> str:
    """RT-35: a failed row with positive counters reads as partial."""
    if run.status == FAILED and (run.retrieved > 0 or run.no_data > 0):
        return PARTIAL
    return run.status


def run_out(run: Run) -> RankRunOut:
    active = run.status in ACTIVE_RUN_STATUSES
    remainder = max(0, run.requested - run.retrieved - run.no_data)
    return RankRunOut(
        id=run.id,
        request_id=run.request_id,
        schedule_id=run.schedule_id,
        device=run.device,
        queue=run.queue,
        status=run.status,
        shown_status=shown_status(run),
        error_code=run.error_code,
        error_message=run.error_message,
        requested=run.requested,
        retrieved=run.retrieved,
        no_data=run.no_data,
        # RT-34: pending only while active, missing only once terminal.
        pending=remainder if active else None,
        missing=None if active else remainder,
        reserved_micros=run.reserved_micros,
        settled_micros=run.settled_micros,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        location_code=run.location_code,
    )


def group_status(runs: list[Run]) -> str:
    """One status for a group (the banner and summary may aggregate; the log keeps the rows)."""
    shown = [shown_status(r) for r in runs]
    if not shown:
        return "empty"
    for active in ACTIVE_RUN_STATUSES[::-1]:
        if active in shown:
            return active
    if all(s == SUCCEEDED for s in shown):
        return SUCCEEDED
    if any(s in (SUCCEEDED, PARTIAL) for s in shown):
        return PARTIAL
    for skipped in (SKIPPED_BALANCE, SKIPPED_DISPATCH):
        if all(s == skipped for s in shown):
            return skipped
    return FAILED


def group_out(request: Request, runs: list[Run]) -> GroupOut:
    outs = [run_out(r) for r in runs]
    terminal = all(o.missing is not None for o in outs)
    settled = [r.settled_micros for r in runs if r.settled_micros is not None]
    return GroupOut(
        request_id=request.id,
        trigger=request.trigger,
        queue=request.queue,
        due_at=request.due_at,
        created_at=request.created_at,
        status=group_status(runs),
        requested=sum(r.requested for r in runs),
        retrieved=sum(r.retrieved for r in runs),
        no_data=sum(r.no_data for r in runs),
        missing=sum(o.missing or 0 for o in outs) if terminal else None,
        settled_micros=sum(settled) if settled else None,
        runs=outs,
    )


async def groups(
    session: ReadSession, schedule_id: int, *, limit: int, before_id: int | None = None
) -> list[GroupOut]:
    stmt = select(Request).where(Request.schedule_id == schedule_id)
    if before_id is not None:
        stmt = stmt.where(keyset.before(Request.id, before_id))
    requests = list(
        (await session.execute(stmt.order_by(Request.id.desc()).limit(limit))).scalars()
    )
    if not requests:
        return []
    runs = (
        await session.execute(
            select(Run)
            .where(Run.request_id.in_([r.id for r in requests]))
            .order_by(Run.device.is_(None), Run.device, Run.id)
        )
    ).scalars()
    by_request: dict[int, list[Run]] = {}
    for run in runs:
        by_request.setdefault(run.request_id, []).append(run)
    return [group_out(r, by_request.get(r.id, [])) for r in requests]


async def schedule_log(
    session: ReadSession, schedule_id: int, *, limit: int = PAGE_SIZE, before_id: int | None = None
) -> LogOut:
    page = await groups(session, schedule_id, limit=limit + 1, before_id=before_id)
    more = len(page) > limit
    page = page[:limit]
    recent = (
        page[:HEALTH_ROWS]
        if before_id is None
        else await groups(session, schedule_id, limit=HEALTH_ROWS)
    )
    health = [
        HealthPoint(
            request_id=g.request_id, status=g.status, retrieved=g.retrieved, requested=g.requested
        )
        for g in reversed(recent)
    ]
    return LogOut(
        items=page,
        next_cursor=str(page[-1].request_id) if more and page else None,
        health=health,
    )


async def last_group(session: ReadSession, schedule_id: int) -> GroupOut | None:
    found = await groups(session, schedule_id, limit=1)
    return found[0] if found else None
