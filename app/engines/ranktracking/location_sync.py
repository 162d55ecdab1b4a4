"""Syncing the provider's locations list into ``rt_locations`` (RT-60, RT-61).

The list (``GET /v3/serp/google/locations``, free) is read whole and upserted by code: a code keeps
its meaning, a renamed location is renamed in place. A location the provider no longer lists is
marked ``dropped_at``, never deleted, so the schedules that use it still show its name and keep
running (with a warning); one that comes back is unmarked.

It runs on first use — a location search, or a schedule naming a code the shipped list does not
know, while nothing was synced yet — and from then on weekly, by the hourly sweep
:data:`LOCATIONS_SWEEP` (a failed sync is tried again at the next tick).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import func, select, update

from app.db.dialect import row_count, upsert
from app.engines.ranktracking import locations
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.location_models import ProviderLocation
from app.integrations.http_guard import OutboundError
from app.integrations.serp.locations import LocationEntry
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import Every, Sweep

log = logging.getLogger(__name__)

RESYNC_AFTER: Final = timedelta(days=7)
CHUNK: Final = 500
"""Rows per statement and transaction: a long list never holds SQLite's writer for long."""
_UPDATED = ("name", "search_text", "parent_code", "country_iso", "kind", "synced_at", "dropped_at")


@dataclass(frozen=True, slots=True)
class SyncReport:
    listed: int
    """Locations the provider lists now (all upserted)."""
    dropped: int
    """Locations newly marked as no longer listed."""


def _row(entry: LocationEntry, now: datetime) -> dict[str, object] | None:
    if not 0 < entry.location_code <= locations.MAX_LOCATION_CODE or not entry.location_name:
        return None
    parent = entry.location_code_parent
    return {
        "code": entry.location_code,
        "name": entry.location_name[:300],
        "search_text": locations.search_text(entry.location_name),
        "parent_code": parent if parent and 0 < parent <= locations.MAX_LOCATION_CODE else None,
        "country_iso": (entry.country_iso_code or "").upper()[:8] or None,
        "kind": (entry.location_type or "")[:40],
        "synced_at": now,
        "dropped_at": None,
    }


async def sync_locations(
    deps: RankTrackingDeps, now: datetime, *, retry: bool = True
) -> SyncReport:
    """Read the provider's whole list and bring the table to it; raises the provider's error
    (nothing is marked dropped unless the whole list was read and stored). ``retry=False`` when a
    person is waiting: one attempt, the sweep retries later."""
    entries = await deps.serp.serp_locations(retry=retry)
    rows = {r["code"]: r for e in entries if (r := _row(e, now)) is not None}
    batch = list(rows.values())
    for start in range(0, len(batch), CHUNK):
        async with deps.db.write() as uow:
            statement = upsert(
                uow.session, ProviderLocation.__table__, conflict=["code"], update=_UPDATED
            )
            await uow.session.execute(statement, batch[start : start + CHUNK])
    dropped = 0
    if batch:  # an empty answer is a provider fault, not the end of every location
        async with deps.db.write() as uow:
            result = await uow.session.execute(
                update(ProviderLocation)
                .where(ProviderLocation.synced_at < now, ProviderLocation.dropped_at.is_(None))
                .values(dropped_at=now)
            )
            dropped = row_count(result)
    log.info("provider locations synced", extra={"listed": len(batch), "dropped": dropped})
    return SyncReport(listed=len(batch), dropped=dropped)


async def last_synced(deps: RankTrackingDeps) -> datetime | None:
    async with deps.db.read() as session:
        return (await session.execute(select(func.max(ProviderLocation.synced_at)))).scalar()


async def ensure_synced(deps: RankTrackingDeps) -> bool:
    """First use: sync now when nothing was ever synced. False when the provider could not be
    read (the shipped list keeps answering; the sweep tries again)."""
    async with deps.db.read() as session:
        if await locations.is_synced(session):
            return True
    try:
        await sync_locations(deps, deps.clock.now(), retry=False)
    except OutboundError as exc:
        log.warning("provider locations could not be synced: %s", exc)
        return False
    return True


async def ensure_known(deps: RankTrackingDeps, code: int | None) -> None:
    """Before a schedule names ``code``: sync first when it is a code only the provider's full
    list can know (not in the shipped list) and nothing was synced yet."""
    if code is None or not 0 < code <= locations.MAX_LOCATION_CODE or locations.shipped(code):
        return
    await ensure_synced(deps)


async def locations_tick(ctx: JobContext, tick: datetime) -> None:
    deps = RankTrackingDeps.of(ctx)
    now = ctx.clock.now()
    last = await last_synced(deps)
    if last is not None and now - last < RESYNC_AFTER:
        return
    try:
        await sync_locations(deps, now)
    except OutboundError as exc:
        log.warning("provider locations could not be synced; next tick retries: %s", exc)


LOCATIONS_SWEEP = Sweep("ranktracking.locations", Every(3600), locations_tick)
