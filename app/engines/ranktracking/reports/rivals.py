"""The competitors beside the tracked domain, per measured run: how many keywords the page was
read for, the average position and the visibility of each competitor domain (the same formula as
the tracked domain's, :mod:`.visibility`), from the positions the results recorded on the same
pages — and who gained and who lost between the last two measurements."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from app.db.session import ReadSession
from app.engines.ranktracking.models import RETRIEVED, Result, Run, Schedule
from app.engines.ranktracking.reports.measurements import KEYWORD_DATA, Column, measured_runs
from app.engines.ranktracking.reports.summary import run_summaries
from app.engines.ranktracking.reports.visibility import CTR_BY_POSITION
from app.schemas import Schema


@dataclass(frozen=True, slots=True)
class Figures:
    measured: int
    ranked: int
    average_position: float | None
    visibility: float | None


def figures_of(counts: list[tuple[int | None, int]]) -> Figures:
    """The figures of one domain in one run from how many keywords had each position (None: not
    within the depth)."""
    measured = sum(n for _, n in counts)
    ranked = [(p, n) for p, n in counts if p is not None]
    keywords = sum(n for _, n in ranked)
    ctr = sum(CTR_BY_POSITION.get(p, 0.0) * n for p, n in ranked)
    return Figures(
        measured=measured,
        ranked=keywords,
        average_position=round(sum(p * n for p, n in ranked) / keywords, 2) if keywords else None,
        visibility=round(100 * ctr / (measured * CTR_BY_POSITION[1]), 2) if measured else None,
    )


async def competitor_figures(
    session: ReadSession, columns: list[Column], domains: list[str]
) -> dict[tuple[int, str, str], Figures]:
    """``(request id, device, domain)`` → the domain's figures in that run, for each competitor
    the run was admitted with (a domain added later has no figures for earlier runs).

    The database counts the keywords per run and position (one JSON lookup a result, grouped):
    decoding every result's JSON here was most of the chart's time on a large schedule."""
    where = {
        run_id: (column.request_id, device)
        for column in columns
        for device, run_id in column.runs.items()
        if device != KEYWORD_DATA
    }
    if not where or not domains:
        return {}
    carried = {
        run_id: set(found or [])
        for run_id, found in (
            await session.execute(select(Run.id, Run.competitors).where(Run.id.in_(list(where))))
        ).all()
    }
    out: dict[tuple[int, str, str], Figures] = {}
    for domain in domains:
        runs = [run_id for run_id in where if domain in carried.get(run_id, set())]
        if not runs:
            continue
        position = Result.competitors[domain].as_integer()
        rows = await session.execute(
            select(Result.run_id, position, func.count())
            .where(Result.run_id.in_(runs), Result.state == RETRIEVED)
            .group_by(Result.run_id, position)
        )
        counts: dict[int, list[tuple[int | None, int]]] = {}
        for run_id, found, n in rows.all():
            counts.setdefault(run_id, []).append((found, int(n)))
        for run_id, histogram in counts.items():
            request_id, device = where[run_id]
            out[(request_id, device, domain)] = figures_of(histogram)
    return out


class RivalOut(Schema):
    domain: str
    tracked: bool
    """The schedule's own domain (the others are its competitors)."""
    device: str
    visibility: float | None
    visibility_change: float | None
    """Points of visibility since the previous measurement (None: not measured then)."""
    average_position: float | None
    average_change: float | None
    """Places gained on average (positive: better, a lower position)."""
    trend: str
    """``gained``, ``lost``, ``same`` or ``new`` (no previous figures)."""


class RivalsOut(Schema):
    schedule_id: int
    measured_at: str | None
    previous_at: str | None
    items: list[RivalOut]
    """Biggest visibility gain first."""


def _rival(
    domain: str, tracked: bool, device: str, now: Figures | None, then: Figures | None
) -> RivalOut | None:
    if now is None:
        return None
    change = (
        round(now.visibility - then.visibility, 2)
        if then is not None and now.visibility is not None and then.visibility is not None
        else None
    )
    places = (
        round(then.average_position - now.average_position, 2)
        if then is not None and now.average_position is not None and then.average_position
        else None
    )
    trend = (
        "new" if change is None else "gained" if change > 0 else "lost" if change < 0 else "same"
    )
    return RivalOut(
        domain=domain,
        tracked=tracked,
        device=device,
        visibility=now.visibility,
        visibility_change=change,
        average_position=now.average_position,
        average_change=places,
        trend=trend,
    )


async def who_gained(session: ReadSession, schedule: Schedule) -> RivalsOut:
    """The tracked domain and its competitors, per device, between the last two measurements."""
    domains = list(schedule.competitors or [])
    columns = await measured_runs(session, schedule.id, limit_requests=2)
    if not domains or not columns:
        return RivalsOut(schedule_id=schedule.id, measured_at=None, previous_at=None, items=[])
    latest, previous = columns[-1], (columns[0] if len(columns) > 1 else None)
    own = {
        (s.request_id, s.device): Figures(s.measured, s.ranked, s.average_position, s.visibility)
        for s in await run_summaries(session, columns)
    }
    rivals = await competitor_figures(session, columns, domains)
    items: list[RivalOut] = []
    for device in [d for d in ("desktop", "mobile") if d in latest.runs]:
        then_id = previous.request_id if previous else -1
        found = _rival(
            schedule.domain or "",
            True,
            device,
            own.get((latest.request_id, device)),
            own.get((then_id, device)),
        )
        items += [found] if found else []
        for domain in domains:
            found = _rival(
                domain,
                False,
                device,
                rivals.get((latest.request_id, device, domain)),
                rivals.get((then_id, device, domain)),
            )
            items += [found] if found else []
    items.sort(key=lambda r: (-(r.visibility_change or 0.0), r.device, not r.tracked, r.domain))
    return RivalsOut(
        schedule_id=schedule.id,
        measured_at=latest.measured_at.isoformat(),
        previous_at=previous.measured_at.isoformat() if previous else None,
        items=items,
    )
