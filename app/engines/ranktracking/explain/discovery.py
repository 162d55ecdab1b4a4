"""Competitors found rather than typed (RT-72): across the schedule's keywords in its latest
measurement, the domains that rank above the tracked one on the most results pages."""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.ranktracking.explain.schemas import DiscoveredCompetitor, DiscoveryOut
from app.engines.ranktracking.explain.snapshot import bare, matches, organic_domains
from app.engines.ranktracking.explain_models import SerpSnapshot
from app.engines.ranktracking.models import RETRIEVED, Result, Schedule
from app.engines.ranktracking.reports.measurements import KEYWORD_DATA, measured_runs

DEFAULT_LIMIT = 10


async def discover(
    session: ReadSession, schedule: Schedule, limit: int = DEFAULT_LIMIT
) -> DiscoveryOut:
    columns = await measured_runs(session, schedule.id, limit_requests=1)
    run_ids = [r for c in columns for d, r in c.runs.items() if d != KEYWORD_DATA]
    if not run_ids:
        return DiscoveryOut(pages=0, items=[])
    rows = await session.execute(
        select(Result.position, SerpSnapshot.body)
        .join(SerpSnapshot, SerpSnapshot.result_id == Result.id)
        .where(
            Result.schedule_id == schedule.id,
            Result.run_id.in_(run_ids),
            Result.state == RETRIEVED,
        )
    )
    domain = schedule.domain or ""
    above: Counter[str] = Counter()
    ranks: dict[str, list[int]] = defaultdict(list)
    pages = 0
    for position, body in rows.all():
        organic = organic_domains(body)
        pages += 1
        mine = position if position is not None else len(organic) + 1
        seen: set[str] = set()
        for rank, host in enumerate(organic[: mine - 1], start=1):
            if not host or host in seen or matches(host, domain):
                continue
            seen.add(host)
            above[host] += 1
            ranks[host].append(rank)
    tracked = {bare(d) for d in schedule.competitors or []}
    ordered = sorted(above.items(), key=lambda kv: (-kv[1], sum(ranks[kv[0]]) / kv[1], kv[0]))
    return DiscoveryOut(
        pages=pages,
        items=[
            DiscoveredCompetitor(
                domain=host,
                above=count,
                share=round(100 * count / pages, 1),
                average_position=round(sum(ranks[host]) / len(ranks[host]), 1),
                tracked=host in tracked,
            )
            for host, count in ordered[:limit]
        ],
    )
