"""``date_field`` triggers: "on the birthday", "7 days before renewal", "a year after signing up".

The fire time is the contact's date plus the offset, at the trigger's hour in the **contact's** time
zone (so 9 am is 9 am where they live, on both sides of a daylight-saving change). Each occurrence
fires once: a row keyed (funnel, trigger, contact, occurrence date) is inserted with ``ON CONFLICT
DO NOTHING`` before the contact is offered entry, whatever the number of sweeps or processes.

A sweep does not read every contact: it looks at the window since the trigger's previous sweep (a
watermark row), works out the few calendar days whose fire time can fall in that window in any
time zone (UTC-12 to UTC+14), and asks the database only for contacts whose date (or, for yearly
triggers, month and day) is one of them. A fire time missed by up to :data:`LOOKBACK` (a stopped
server) still fires; older ones do not.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select

from app.db.dialect import insert
from app.db.session import WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import STANDARD_FIELDS
from app.engines.funnels.definitions.graph import DateField, graph_for_version
from app.engines.funnels.events.claim.triggers import admit
from app.engines.funnels.events.models import TriggerFire
from app.engines.funnels.events.work.segment_triggers import live_versions, trigger_key
from app.engines.funnels.models import Contact, Funnel, FunnelVersion
from app.engines.funnels.runs.due.entry import enter
from app.scheduling.zones import local_to_utc, zone_or_utc

LOOKBACK = timedelta(days=1)
WATERMARK = "swept"
"""``occurrence`` of the row (contact 0) holding when a trigger was last swept."""
_EARLIEST_OFFSET = timedelta(hours=12)  # UTC-12, the westernmost time zone
_LATEST_OFFSET = timedelta(hours=14)  # UTC+14, the easternmost


def _anniversary(day: date, year: int) -> date:
    """``day`` in ``year``; 29 February becomes the 28th in other years."""
    last = calendar.monthrange(year, day.month)[1]
    return date(year, day.month, min(day.day, last))


def due_occurrence(
    trigger: DateField,
    value: object,
    tz_name: str,
    now: datetime,
    since: datetime | None = None,
) -> date | None:
    """The occurrence (the local day the trigger fires on) whose fire time falls in
    ``(since, now]`` (``since`` defaults to ``now - LOOKBACK``), if any."""
    since = now - LOOKBACK if since is None else since
    if not isinstance(value, str):
        return None
    try:
        base = date.fromisoformat(value[:10])
    except ValueError:
        return None
    tz = zone_or_utc(tz_name)
    offset = timedelta(days=trigger.offset_days)
    if trigger.yearly:
        year = now.astimezone(tz).year
        candidates = [_anniversary(base, y) + offset for y in (year - 1, year, year + 1)]
    else:
        candidates = [base + offset]
    for day in candidates:
        fire_at = local_to_utc(day, time(trigger.hour, trigger.minute), tz)
        if since < fire_at <= now:
            return day
    return None


def candidate_days(since: datetime, now: datetime, hour: int, minute: int) -> list[date]:
    """Every local day whose ``hour:minute`` falls in ``(since, now]`` in some time zone (a
    superset: the exact check is :func:`due_occurrence`)."""
    at = timedelta(hours=hour, minutes=minute)
    first = (since - at - _EARLIEST_OFFSET).date()
    last = (now - at + _LATEST_OFFSET).date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def value_filter(trigger: DateField, days: list[date], value: ColumnElement[str]) -> Any:
    """SQL: the contact's date makes one of ``days`` an occurrence of ``trigger``."""
    bases = [day - timedelta(days=trigger.offset_days) for day in days]
    if not trigger.yearly:
        return value.in_(sorted({b.isoformat() for b in bases}))
    month_days = {b.strftime("%m-%d") for b in bases}
    if any(b.month == 2 and b.day == 28 and not calendar.isleap(b.year) for b in bases):
        month_days.add("02-29")  # a 29 February date has its anniversary on the 28th
    return func.substr(value, 6, 5).in_(sorted(month_days))


async def fire_date_triggers(session: WriteSession, *, now: datetime) -> int:
    """Fire every due ``date_field`` occurrence; returns how many runs started."""
    started = 0
    for funnel, version in await live_versions(session):
        graph = graph_for_version(version.id, version.definition)
        for trigger in graph.definition.triggers:
            if isinstance(trigger, DateField):
                started += await _fire(session, funnel, version, trigger, now)
    return started


async def _fire(
    session: WriteSession, funnel: Funnel, version: FunnelVersion, trigger: DateField, now: datetime
) -> int:
    ws = funnel.workspace_id
    if trigger.field in STANDARD_FIELDS:
        return 0  # standard attributes are not dates
    key = trigger_key(trigger)
    since = await _swept_until(session, funnel.id, key, now)
    await _mark_swept(session, funnel.id, key, now)
    if since >= now:
        return 0
    rows = await candidates(session, ws, trigger, since, now)
    custom = await field_types(session, ws)
    started = 0
    for contact_id, tz_name, raw in rows:
        day = due_occurrence(trigger, raw, tz_name, now, since)
        if day is None:
            continue
        fired = await session.scalar(
            insert(session, TriggerFire)
            .values(
                funnel_id=funnel.id,
                trigger_key=key,
                contact_id=contact_id,
                occurrence=day.isoformat(),
                fired_at=now,
            )
            .on_conflict_do_nothing()
            .returning(TriggerFire.funnel_id)
        )
        if fired is None:
            continue
        if await admit(session, version, contact_id, now, custom) and await enter(
            session,
            version=version,
            contact_id=contact_id,
            now=now,
            context={"trigger": {"kind": "date_field", "occurrence": day.isoformat()}},
        ):
            started += 1
    return started


async def candidates(
    session: WriteSession, workspace_id: int, trigger: DateField, since: datetime, now: datetime
) -> list[tuple[int, str, str]]:
    """``(contact id, time zone, date)`` of the contacts whose date can make ``trigger`` fire in
    ``(since, now]``: only those dates are read, not every contact's."""
    value = Contact.fields[trigger.field].as_string()
    days = candidate_days(since, now, trigger.hour, trigger.minute)
    rows = await session.execute(
        scoped_select(Contact, workspace_id, Contact.id, Contact.timezone, value).where(
            Contact.deleted_at.is_(None), value_filter(trigger, days, value)
        )
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def _swept_until(session: WriteSession, funnel_id: int, key: str, now: datetime) -> datetime:
    """Where this sweep's window starts: the previous sweep, or at most :data:`LOOKBACK` ago."""
    previous = await session.scalar(
        select(TriggerFire.fired_at).where(
            TriggerFire.funnel_id == funnel_id,
            TriggerFire.trigger_key == key,
            TriggerFire.contact_id == 0,
            TriggerFire.occurrence == WATERMARK,
        )
    )
    earliest = now - LOOKBACK
    return earliest if previous is None else max(previous, earliest)


async def _mark_swept(session: WriteSession, funnel_id: int, key: str, now: datetime) -> None:
    statement = insert(session, TriggerFire).values(
        funnel_id=funnel_id, trigger_key=key, contact_id=0, occurrence=WATERMARK, fired_at=now
    )
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=["funnel_id", "trigger_key", "contact_id", "occurrence"],
            set_={"fired_at": now},
            # A sweep with an older clock never moves the watermark back.
            where=TriggerFire.fired_at < now,
        )
    )
