"""The child runs a request writes: one per device, admitted (``dispatching``, its reservation
held) or already ended with the code that stopped it, so the log shows every request as a group
(RT-33)."""

from __future__ import annotations

from datetime import datetime

from app.db.session import WriteSession
from app.engines.ranktracking.models import (
    DISPATCHING,
    FAILED,
    RES_HELD,
    RES_NONE,
    RESERVATIONS,
    RUNS,
    Request,
    Run,
    Schedule,
)
from app.engines.ranktracking.records import activity


def devices(schedule: Schedule) -> list[str | None]:
    return list(schedule.device_list) if schedule.data_type == "serp" else [None]


def new_run(
    schedule: Schedule,
    request: Request,
    *,
    device: str | None,
    status: str,
    now: datetime,
    keywords: list[str] | None = None,
    code: str | None = None,
    message: str | None = None,
    reserved_micros: int = 0,
) -> Run:
    """A child run; an admitted one is written with its reservation (``reserved_micros``) held."""
    terminal = status != DISPATCHING
    return Run(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        request_id=request.id,
        data_type=schedule.data_type,
        device=device,
        queue=request.queue,
        depth=schedule.depth,
        location_code=schedule.location_code,
        language_code=schedule.language_code,
        domain=schedule.domain,
        competitors=list(schedule.competitors or []) or None,
        packages=list(schedule.packages or []) or None,
        keywords=keywords or [],
        **RUNS.create(status),
        error_code=code,
        error_message=message,
        requested=len(keywords or []),
        retrieved=0,
        no_data=0,
        reserved_micros=reserved_micros,
        **RESERVATIONS.create(RES_HELD if reserved_micros else RES_NONE),
        polls=0,
        created_at=now,
        finished_at=now if terminal else None,
        updated_at=now,
    )


def trace(
    session: WriteSession,
    schedule: Schedule,
    request: Request,
    *,
    status: str,
    code: str,
    message: str,
    now: datetime,
) -> None:
    """Child rows for a request that never ran: one per device, so the log shows the group."""
    for device in devices(schedule):
        session.add(
            new_run(
                schedule, request, device=device, status=status, now=now, code=code, message=message
            )
        )
    activity.record(
        session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=activity.RUN_FAILED if status == FAILED else activity.RUN_SKIPPED,
        code=code,
        message=f'"{schedule.name}": {message}',
        now=now,
    )
