"""Which child runs count as measurements: terminal, not cancelled, with at least one keyword
retrieved or answered "no data" — the same rule as the schedule's latest results, so a run still
active, one that returned nothing, and one closed by a pause are passed over.

Desktop and mobile of one request were admitted together: they share the request's time, which is
what puts them on the same x in a chart and in the same column of the table."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, or_, select

from app.db import keyset
from app.db.session import ReadSession
from app.engines.ranktracking.models import CANCELLED, TERMINAL_RUN_STATUSES, Request, Run

KEYWORD_DATA = "keyword_data"


def run_set(run_ids: list[int]) -> Select[int]:
    """``run_ids`` as a subquery, for ``Result.run_id.in_(run_set(ids))`` over many results:
    PostgreSQL hashes a subquery's rows once, while a list of bound values is searched element
    by element for every result once the statement runs on a generic plan (a prepared statement
    run several times; about 3x slower over a 52-run window)."""
    return select(Run.id).where(Run.id.in_(run_ids))


@dataclass(frozen=True, slots=True)
class Measurement:
    run_id: int
    request_id: int
    device: str
    measured_at: datetime


@dataclass(frozen=True, slots=True)
class Column:
    request_id: int
    measured_at: datetime
    runs: dict[str, int]


async def measured_runs(
    session: ReadSession,
    schedule_id: int,
    *,
    before_request: int | None = None,
    limit_requests: int | None = None,
) -> list[Column]:
    """The schedule's measured requests, oldest first (the newest ``limit_requests`` of them, older
    than ``before_request`` when given)."""
    query = (
        select(Run.id, Run.request_id, Run.device, Request.created_at)
        .join(Request, Request.id == Run.request_id)
        .where(
            Run.schedule_id == schedule_id,
            Run.status.in_(TERMINAL_RUN_STATUSES),
            Run.retrieved + Run.no_data > 0,
            or_(Run.error_code.is_(None), Run.error_code != CANCELLED),
        )
        .order_by(Run.request_id.desc(), Run.id)
    )
    if before_request is not None:
        query = query.where(keyset.before(Run.request_id, before_request))
    columns: dict[int, Column] = {}
    for run_id, request_id, device, created_at in (await session.execute(query)).all():
        column = columns.get(request_id)
        if column is None:
            if limit_requests is not None and len(columns) >= limit_requests:
                break
            column = columns[request_id] = Column(request_id, created_at, {})
        column.runs[device or KEYWORD_DATA] = run_id
    return sorted(columns.values(), key=lambda c: c.request_id)
