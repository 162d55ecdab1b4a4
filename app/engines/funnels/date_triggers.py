"""``date_field`` triggers: "on the birthday", "7 days before renewal", "a year after signing up".

The fire time is the contact's date plus the offset, at the trigger's hour in the **contact's** time
zone (so 9 am is 9 am where they live, on both sides of a daylight-saving change). Each occurrence
fires once: a row keyed (funnel, trigger, contact, occurrence date) is inserted with ``ON CONFLICT
DO NOTHING`` before the contact is offered entry, whatever the number of sweeps or processes. A
fire time missed by up to :data:`LOOKBACK` (a stopped server) still fires; older ones do not.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta

from sqlalchemy import select

from app.db.session import WriteSession
from app.engines.funnels.contacts import _insert, dialect_of, field_types
from app.engines.funnels.entry import enter
from app.engines.funnels.events import TriggerFire
from app.engines.funnels.graph import DateField, graph_for_version
from app.engines.funnels.models import Contact, Funnel, FunnelVersion
from app.engines.funnels.segment_triggers import live_versions, trigger_key
from app.engines.funnels.segments import STANDARD_FIELDS
from app.engines.funnels.timing import local_to_utc, zone
from app.engines.funnels.triggers import admit

LOOKBACK = timedelta(days=1)


def _anniversary(day: date, year: int) -> date:
    """``day`` in ``year``; 29 February becomes the 28th in other years."""
    last = calendar.monthrange(year, day.month)[1]
    return date(year, day.month, min(day.day, last))


def due_occurrence(trigger: DateField, value: object, tz_name: str, now: datetime) -> date | None:
    """The occurrence (the local day the trigger fires on) that is due at ``now``, if any."""
    if not isinstance(value, str):
        return None
    try:
        base = date.fromisoformat(value[:10])
    except ValueError:
        return None
    tz = zone(tz_name)
    offset = timedelta(days=trigger.offset_days)
    if trigger.yearly:
        year = now.astimezone(tz).year
        candidates = [_anniversary(base, y) + offset for y in (year - 1, year, year + 1)]
    else:
        candidates = [base + offset]
    for day in candidates:
        fire_at = local_to_utc(day, time(trigger.hour, trigger.minute), tz)
        if fire_at <= now < fire_at + LOOKBACK:
            return day
    return None


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
    value = Contact.fields[trigger.field].as_string()
    rows = (
        await session.execute(
            select(Contact.id, Contact.timezone, value).where(
                Contact.workspace_id == ws, Contact.deleted_at.is_(None), value.is_not(None)
            )
        )
    ).all()
    key = trigger_key(trigger)
    custom = await field_types(session, ws)
    started = 0
    for contact_id, tz_name, raw in rows:
        day = due_occurrence(trigger, raw, tz_name, now)
        if day is None:
            continue
        fired = await session.scalar(
            _insert(dialect_of(session), TriggerFire)
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
