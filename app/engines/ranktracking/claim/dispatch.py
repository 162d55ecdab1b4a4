"""The recurring dispatcher (RT-30): every hour at minute 20 UTC, a bounded batch of due active
schedules, oldest due first, admitted in chunks (one unit of work each, every schedule's group
still all-or-nothing: see :func:`~app.engines.ranktracking.claim.admission.admit_many`).

Schedules left over when the batch is full stay due and show "next run pending" until a later sweep
(a batch backlog is visible, never silent). A schedule whose admission raised is logged and stays due.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from app.db.dialect import concurrent_writers
from app.engines.ranktracking.claim.admission import RECURRING, Launch
from app.engines.ranktracking.claim.handoff import admit_and_send, admit_batch_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import ACTIVE, Schedule
from app.engines.ranktracking.pricing import STANDARD
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import HOURLY_AT_20, Sweep

log = logging.getLogger(__name__)

ADMISSION_CHUNK = 100
"""Schedules admitted in one transaction: large enough to amortise the round trips, small enough
that a chunk holds its balance rows only briefly."""


@dataclass(slots=True)
class DispatchReport:
    selected: int = 0
    launched_runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: int = 0


async def due_schedules(deps: RankTrackingDeps, now: datetime, limit: int) -> list[tuple[int, int]]:
    """``(schedule id, organisation id)`` of the active schedules due by ``now``, oldest first."""
    async with deps.db.read() as session:
        rows = await session.execute(
            select(Schedule.id, Schedule.organisation_id)
            .where(Schedule.status == ACTIVE, Schedule.next_due_at <= now)
            .order_by(Schedule.next_due_at, Schedule.id)
            .limit(limit)
        )
        return [(int(i), int(org)) for i, org in rows.all()]


async def due_schedule_ids(deps: RankTrackingDeps, now: datetime, limit: int) -> list[int]:
    return [i for i, _ in await due_schedules(deps, now, limit)]


def plan_lanes(due: list[tuple[int, int]], chunk: int) -> list[list[list[int]]]:
    """Split due schedules into lanes of admission chunks (each chunk one transaction).

    Two lanes never share an organisation, so lanes admitted at the same time never wait on each
    other's balance row. An organisation with ``chunk`` or more due schedules gets a lane of its
    own, its chunks admitted one after the other in due order; smaller organisations share
    chunks. Within a chunk schedules keep their due order (the oldest is served first when a
    balance runs short).
    """
    by_org: dict[int, list[int]] = {}
    for schedule_id, org in due:
        by_org.setdefault(org, []).append(schedule_id)
    lanes: list[list[list[int]]] = []
    shared: list[int] = []
    for ids in by_org.values():
        if len(ids) >= chunk:
            lanes.append([ids[i : i + chunk] for i in range(0, len(ids), chunk)])
            continue
        if len(shared) + len(ids) > chunk:
            lanes.append([shared])
            shared = []
        shared.extend(ids)
    if shared:
        lanes.append([shared])
    return lanes


async def _admit_chunk(
    deps: RankTrackingDeps, ids: list[int], now: datetime, tick: datetime
) -> list[Launch | None]:
    """One chunk in one unit of work; if it fails as a whole, each schedule is admitted alone so
    that one bad row cannot hold the others back (the failing one is logged and stays due)."""
    try:
        return list(
            await admit_batch_and_send(
                deps, ids, trigger=RECURRING, queue=STANDARD, now=now, tick=tick
            )
        )
    except Exception:
        log.warning("admission batch of %d schedules failed; admitting them one by one", len(ids))
    launches: list[Launch | None] = []
    for schedule_id in ids:
        try:
            launches.append(
                await admit_and_send(
                    deps, schedule_id, trigger=RECURRING, queue=STANDARD, now=now, tick=tick
                )
            )
        except Exception:
            log.exception("admission of schedule %s failed; it stays due", schedule_id)
            launches.append(None)
    return launches


async def dispatch_due(
    deps: RankTrackingDeps,
    now: datetime,
    *,
    due_by: datetime | None = None,
    limit: int | None = None,
) -> DispatchReport:
    """Admit one bounded batch of the active schedules due by ``due_by`` (the sweep's nominal
    tick; default ``now``). A tick that runs late still takes only what was due at its scheduled
    time, and a retry it schedules counts its hour from that nominal time (RT-31)."""
    rt = deps.settings.ranktracking
    tick = min(due_by or now, now)
    due = await due_schedules(deps, tick, limit or rt.dispatch_batch)
    report = DispatchReport(selected=len(due))
    # Lanes (disjoint organisations) run at once where writers can.
    gate = asyncio.Semaphore(max(1, rt.dispatch_concurrency) if concurrent_writers(deps.db) else 1)

    async def lane(chunks: list[list[int]]) -> list[Launch | None]:
        async with gate:
            launches: list[Launch | None] = []
            for ids in chunks:
                launches += await _admit_chunk(deps, ids, now, tick)
            return launches

    for launches in await asyncio.gather(*(lane(c) for c in plan_lanes(due, ADMISSION_CHUNK))):
        for launch in launches:
            if launch is None:
                report.errors += 1
                continue
            report.launched_runs += launch.launched
            key = launch.reason or "launched"
            report.outcomes[key] = report.outcomes.get(key, 0) + 1
    log.info(
        "position tracking sweep",
        extra={"selected": report.selected, "runs": report.launched_runs, **report.outcomes},
    )
    return report


async def dispatch_tick(ctx: JobContext, tick: datetime) -> None:
    await dispatch_due(RankTrackingDeps.of(ctx), ctx.clock.now(), due_by=tick)


DISPATCH_SWEEP = Sweep("ranktracking.dispatch", HOURLY_AT_20, dispatch_tick)
