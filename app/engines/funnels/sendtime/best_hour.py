"""The contact's best hour (pure).

Each past open or click counts once for the hour of the day it happened at, in the contact's own
time zone (so a person who reads at 7 am in Tokyo is not sent mail at 7 am UTC). The best hour is
the one with the most; a tie goes to the earlier hour, so the same history always gives the same
hour. With fewer than :data:`MIN_REACTIONS` reactions there is not enough to go on, and the step
keeps its own time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from app.scheduling.zones import local_to_utc

LOOKBACK_DAYS = 90
"""Only reactions of the last 90 days count: habits change."""
MIN_REACTIONS = 3
"""Fewer opens and clicks than this say nothing reliable about a person's hours."""
REACTION_EVENTS = ("message_opened", "link_clicked")
"""The contact events that show when a person reads their mail (FN-11)."""


@dataclass(frozen=True, slots=True)
class BestHour:
    hour: int
    """Local hour, 0-23."""
    reactions: int
    """Opens and clicks counted."""
    at_that_hour: int
    """How many of them happened in that hour."""


def best_hour(reactions: Iterable[datetime], tz: ZoneInfo) -> BestHour | None:
    """The local hour most of ``reactions`` happened in, or ``None`` when there are too few."""
    hours = Counter(moment.astimezone(tz).hour for moment in reactions)
    total = sum(hours.values())
    if total < MIN_REACTIONS:
        return None
    hour, count = min(hours.items(), key=lambda item: (-item[1], item[0]))
    return BestHour(hour=hour, reactions=total, at_that_hour=count)


def next_at_hour(now: datetime, tz: ZoneInfo, hour: int) -> datetime:
    """``now`` when it is already that hour locally; otherwise the next ``hour``:00 local (today
    or tomorrow), daylight-saving changes included."""
    local = now.astimezone(tz)
    if local.hour == hour:
        return now
    day = local.date()
    if local.hour > hour:
        day += timedelta(days=1)
    return local_to_utc(day, time(hour, 0), tz)
