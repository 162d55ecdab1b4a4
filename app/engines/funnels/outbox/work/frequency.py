"""The workspace's frequency cap: at most N marketing messages per contact per day and/or week,
across every funnel and campaign, checked when the message goes out.

Days and weeks are the contact's calendar ones (ISO weeks, Monday to Sunday, in the contact's
time zone): "two a day" means two between their midnights. A message counts when it is about to
be handed to its provider: the sender **reserves** a slot in ``funnel_frequency_counts`` (one row
per contact and period, updated under the write lock, so two senders racing for the same contact
cannot both take the last slot) and gives it back if the message did not go out. A sender killed
between reserving and sending leaves a slot taken for a message that was never sent: the cap
errs on the side of sending less.

Which messages count (marketing ones: not transactional mail, team notifications or requests) and
what a refused slot does to a message is the consent gate's decision
(:mod:`app.engines.funnels.consent.policy`); this module keeps the counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import select

from app.db.chunked import CHUNK_ROWS, delete_in_chunks
from app.db.dialect import insert_ignoring
from app.db.session import Database, ReadSession, WriteSession
from app.db.tenancy import scoped_update
from app.engines.funnels.models import FrequencyCap, FrequencyCount


@dataclass(frozen=True, slots=True)
class Cap:
    per_day: int | None = None
    per_week: int | None = None

    @property
    def active(self) -> bool:
        return self.per_day is not None or self.per_week is not None


@dataclass(frozen=True, slots=True)
class Period:
    key: str
    """``d2026-03-02`` or ``w2026-10`` (ISO year and week)."""
    limit: int
    ends: datetime
    """The period's end (the contact's next midnight, or next Monday's), UTC."""


@dataclass(frozen=True, slots=True)
class Want:
    """One message that would like to go out now."""

    ref: Any
    """The caller's handle (an effect id, a recipient's seq)."""
    workspace_id: int
    contact_id: int
    timezone: str


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def periods(cap: Cap, now: datetime, timezone: str) -> list[Period]:
    """The periods ``now`` falls in for a contact in ``timezone`` (pure)."""
    tz = _zone(timezone)
    local = now.astimezone(tz)
    today = local.date()
    found: list[Period] = []
    if cap.per_day is not None:
        ends = datetime.combine(today + timedelta(days=1), time(), tz)
        found.append(Period(f"d{today.isoformat()}", cap.per_day, ends.astimezone(now.tzinfo)))
    if cap.per_week is not None:
        year, week, weekday = today.isocalendar()
        ends = datetime.combine(today + timedelta(days=8 - weekday), time(), tz)
        found.append(Period(f"w{year}-{week:02d}", cap.per_week, ends.astimezone(now.tzinfo)))
    return found


async def caps_of(session: ReadSession, workspace_ids: Iterable[int]) -> dict[int, Cap]:
    """The active caps of these workspaces (a workspace without one is absent)."""
    ids = set(workspace_ids)
    if not ids:
        return {}
    rows = await session.scalars(select(FrequencyCap).where(FrequencyCap.workspace_id.in_(ids)))
    found = {r.workspace_id: Cap(r.per_day, r.per_week) for r in rows}
    return {ws: cap for ws, cap in found.items() if cap.active}


async def get_cap(session: ReadSession, workspace_id: int) -> Cap:
    return (await caps_of(session, [workspace_id])).get(workspace_id, Cap())


async def set_cap(session: WriteSession, workspace_id: int, cap: Cap, now: datetime) -> Cap:
    row = await session.get(FrequencyCap, workspace_id)
    if row is None:
        row = FrequencyCap(workspace_id=workspace_id, created_at=now)
        session.add(row)
    row.per_day, row.per_week, row.updated_at = cap.per_day, cap.per_week, now
    await session.flush()
    return cap


async def reserve(
    session: WriteSession, caps: dict[int, Cap], wants: list[Want], now: datetime
) -> dict[Any, datetime]:
    """Take a slot for each message in ``wants``, in order, where its contact's periods have one
    left. Returns the refused ones: ``ref`` → the next time one could go (the end of the latest
    full period). Messages of a workspace without a cap are always let through."""
    plans: list[tuple[Want, list[Period]]] = []
    rows: dict[tuple[int, str], tuple[int, datetime]] = {}
    for want in wants:
        cap = caps.get(want.workspace_id)
        if cap is None:
            continue
        ps = periods(cap, now, want.timezone)
        plans.append((want, ps))
        for p in ps:
            rows[(want.contact_id, p.key)] = (want.workspace_id, p.ends)
    if not rows:
        return {}
    await session.execute(
        insert_ignoring(session, FrequencyCount.__table__),
        [
            {"contact_id": c, "period": k, "workspace_id": ws, "sent": 0, "until": ends}
            for (c, k), (ws, ends) in rows.items()
        ],
    )
    contact_ids = {c for c, _ in rows}
    current = {
        (r.contact_id, r.period): r.sent
        for r in (
            await session.execute(
                select(FrequencyCount.contact_id, FrequencyCount.period, FrequencyCount.sent)
                .where(
                    FrequencyCount.contact_id.in_(contact_ids),
                    FrequencyCount.period.in_({k for _, k in rows}),
                )
                # PostgreSQL: a second sender waits here; SQLite writes hold the database lock.
                .with_for_update()
            )
        ).all()
    }
    taken: dict[tuple[int, str], int] = {}
    refused: dict[Any, datetime] = {}
    for want, ps in plans:
        keys = [(want.contact_id, p.key) for p in ps]
        full = [
            p
            for p, key in zip(ps, keys, strict=True)
            if current.get(key, 0) + taken.get(key, 0) >= p.limit
        ]
        if full:
            refused[want.ref] = max(p.ends for p in full)
            continue
        for key in keys:
            taken[key] = taken.get(key, 0) + 1
    for (contact_id, period), n in taken.items():
        workspace_id, _ = rows[(contact_id, period)]
        await session.execute(
            scoped_update(FrequencyCount, workspace_id)
            .where(FrequencyCount.contact_id == contact_id, FrequencyCount.period == period)
            .values(sent=FrequencyCount.sent + n)
        )
    return refused


async def release(
    session: WriteSession, caps: dict[int, Cap], wants: list[Want], reserved_at: datetime
) -> None:
    """Give back the slots of messages that were reserved at ``reserved_at`` and did not go."""
    for want in wants:
        cap = caps.get(want.workspace_id)
        if cap is None:
            continue
        for p in periods(cap, reserved_at, want.timezone):
            await session.execute(
                scoped_update(FrequencyCount, want.workspace_id)
                .where(
                    FrequencyCount.contact_id == want.contact_id,
                    FrequencyCount.period == p.key,
                    FrequencyCount.sent > 0,
                )
                .values(sent=FrequencyCount.sent - 1)
            )


async def prune(db: Database, now: datetime, *, chunk_rows: int = CHUNK_ROWS) -> int:
    """Forget counts of periods that ended more than a day ago (in chunks of short
    transactions: after a large campaign these are many rows)."""
    return await delete_in_chunks(
        db,
        FrequencyCount.__table__,  # type: ignore[arg-type]
        FrequencyCount.until < now - timedelta(days=1),
        key=[FrequencyCount.contact_id, FrequencyCount.period],
        chunk_rows=chunk_rows,
    )
