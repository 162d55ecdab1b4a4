"""Plan one message step's send time from the contact's history (FN-37).

A step marked ``best_hour`` sends at the next occurrence of the contact's best hour
(:mod:`.best_hour`); without enough history it sends at the step's own time. Either way the
choice and its basis are recorded in the step's output, so a person reading the run sees why the
message went when it did. The quiet hours are applied afterwards by the step, as for any message.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from app.engines.funnels.models import ContactEvent
from app.engines.funnels.runs.work.nodes.base import NodeContext
from app.engines.funnels.sendtime.best_hour import (
    LOOKBACK_DAYS,
    MIN_REACTIONS,
    REACTION_EVENTS,
    best_hour,
    next_at_hour,
)
from app.scheduling.zones import zone_or_utc

HISTORY_LIMIT = 500
"""The most recent reactions read (enough for a stable hour, bounded for the runner's sake)."""


@dataclass(frozen=True, slots=True)
class Planned:
    at: datetime
    """When the message would go, before the quiet hours."""
    hour: int | None
    """The contact's best hour, ``None`` when the step's time was kept."""
    record: dict[str, Any]
    """What the step's output keeps about the choice."""


async def reactions(ctx: NodeContext) -> list[datetime]:
    since = ctx.now - timedelta(days=LOOKBACK_DAYS)
    rows = await ctx.session.scalars(
        select(ContactEvent.occurred_at)
        .where(
            ContactEvent.contact_id == ctx.contact.id,
            ContactEvent.name.in_(REACTION_EVENTS),
            ContactEvent.occurred_at >= since,
            ContactEvent.occurred_at <= ctx.now,
        )
        .order_by(ContactEvent.occurred_at.desc())
        .limit(HISTORY_LIMIT)
    )
    return list(rows)


async def plan(ctx: NodeContext, wanted: bool) -> Planned | None:
    """The send time of a step that asked for the best hour (``None`` when it did not)."""
    if not wanted:
        return None
    tz = zone_or_utc(ctx.contact.timezone)
    found = best_hour(await reactions(ctx), tz)
    if found is None:
        return Planned(
            at=ctx.now,
            hour=None,
            record={
                "best_hour": None,
                "basis": f"fewer than {MIN_REACTIONS} opens or clicks in {LOOKBACK_DAYS} days: "
                "the step's time",
            },
        )
    at = next_at_hour(ctx.now, tz, found.hour)
    return Planned(
        at=at,
        hour=found.hour,
        record={
            "best_hour": found.hour,
            "timezone": ctx.contact.timezone,
            "basis": f"{found.at_that_hour} of {found.reactions} opens and clicks in the last "
            f"{LOOKBACK_DAYS} days were at {found.hour:02d}:00",
            "at": at.isoformat(),
        },
    )


def decision(now: datetime, release: datetime, planned: Planned | None) -> str:
    """The step's decision: queued now, held for the best hour, or held for quiet hours."""
    if release == now:
        return "queued"
    if planned is not None and planned.hour is not None and release == planned.at:
        return (
            f"held for the contact's best hour ({planned.hour:02d}:00) until {release.isoformat()}"
        )
    return f"held for quiet hours until {release.isoformat()}"
