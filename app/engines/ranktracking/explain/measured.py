"""One keyword's measurements per device, oldest first, with their stored results pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.ranktracking.explain.snapshot import Page, decode
from app.engines.ranktracking.explain_models import SerpSnapshot
from app.engines.ranktracking.models import RETRIEVED, Result
from app.engines.ranktracking.reports.measurements import KEYWORD_DATA, Column, measured_runs


@dataclass(frozen=True, slots=True)
class Measured:
    run_id: int
    request_id: int
    device: str
    measured_at: datetime
    position: int | None
    url: str | None
    features: list[str]
    owned: list[str]
    page: Page | None
    """The stored results page (None: not stored, or past its retention)."""


async def keyword_measurements(
    session: ReadSession,
    schedule_id: int,
    keyword: str,
    *,
    limit_requests: int,
    with_pages: bool = True,
) -> dict[str, list[Measured]]:
    """Device → the keyword's retrieved results over the newest ``limit_requests`` measured
    requests, oldest first (a request that answered "no data" for it is passed over)."""
    columns = await measured_runs(session, schedule_id, limit_requests=limit_requests)
    return await measurements_in(session, schedule_id, columns, [keyword], with_pages=with_pages)


async def measurements_in(
    session: ReadSession,
    schedule_id: int,
    columns: list[Column],
    keywords: list[str] | None,
    *,
    with_pages: bool,
) -> dict[str, list[Measured]]:
    """``keyword|device`` (or just ``device`` for one keyword) → measurements, oldest first."""
    where: dict[int, tuple[Column, str]] = {
        run_id: (c, d) for c in columns for d, run_id in c.runs.items() if d != KEYWORD_DATA
    }
    if not where:
        return {}
    body = SerpSnapshot.body if with_pages else None
    query = (
        select(
            Result.run_id,
            Result.keyword,
            Result.position,
            Result.url,
            Result.features,
            Result.owned_features,
            *([body] if body is not None else []),
        )
        .where(
            Result.schedule_id == schedule_id,
            Result.run_id.in_(list(where)),
            Result.state == RETRIEVED,
        )
        .order_by(Result.run_id)
    )
    if body is not None:
        query = query.outerjoin(SerpSnapshot, SerpSnapshot.result_id == Result.id)
    if keywords is not None:
        query = query.where(Result.keyword.in_(keywords))
    single = keywords is not None and len(keywords) == 1
    out: dict[str, list[Measured]] = {}
    for row in (await session.execute(query)).all():
        column, device = where[row[0]]
        page = decode(row[6]) if with_pages and row[6] is not None else None
        key = device if single else f"{row[1]}|{device}"
        out.setdefault(key, []).append(
            Measured(
                run_id=row[0],
                request_id=column.request_id,
                device=device,
                measured_at=column.measured_at,
                position=row[2],
                url=row[3],
                features=list(row[4] or []),
                owned=list(row[5] or []),
                page=page,
            )
        )
    for items in out.values():
        items.sort(key=lambda m: m.request_id)
    return out
