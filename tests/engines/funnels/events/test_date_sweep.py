"""The ``date_field`` sweep reads only the contacts whose date can fire in the window since the
previous sweep, and still fires every occurrence once, at the trigger's hour in each contact's
time zone (from UTC+14 to UTC-11), for yearly anniversaries (29 February included) and one-off
dates with an offset."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import insert, select

from app.engines.funnels.definitions.graph import DateField
from app.engines.funnels.events.due.date_triggers import candidates, fire_date_triggers
from app.engines.funnels.events.models import TriggerFire
from app.engines.funnels.models import Contact
from tests.engines.funnels.factories import contact, runs_of, setup_names, tagging_funnel

YEAR_START = date(1990, 1, 1)


async def _sweep_until(runtime, clock, end: datetime, step: timedelta) -> None:
    while clock.now() < end:
        clock.advance(seconds=step.total_seconds())
        async with runtime.db.write() as uow:
            await fire_date_triggers(uow.session, now=clock.now())


async def _fired(runtime, funnel_id: int) -> dict[int, tuple[str, datetime]]:
    async with runtime.db.read() as s:
        rows = await s.execute(
            select(TriggerFire.contact_id, TriggerFire.occurrence, TriggerFire.fired_at).where(
                TriggerFire.funnel_id == funnel_id, TriggerFire.contact_id != 0
            )
        )
        return {r[0]: (r[1], r[2]) for r in rows}


async def test_a_sweep_reads_only_the_contacts_that_can_fire(runtime, tenant, clock) -> None:
    """Of 3,650 contacts with birthdays all over the year, a ten-second sweep reads the few whose
    birthday is one of the calendar days that can be 9 am somewhere in that window."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, fields={"birthday": "date"})
    now = clock.now()
    rows = [
        {
            "workspace_id": ws,
            "email": f"p{i}@example.com",
            "timezone": "Europe/Berlin",
            "fields": {"birthday": (YEAR_START + timedelta(days=i % 365)).isoformat()},
            "consent": {},
            "suppressed": {},
            "created_at": now,
            "updated_at": now,
        }
        for i in range(3650)
    ]
    async with runtime.db.write() as uow:
        await uow.session.execute(insert(Contact), rows)
    trigger = DateField(field="birthday", hour=9, yearly=True)
    funnel_id = await tagging_funnel(
        runtime, ws, {"kind": "date_field", "field": "birthday", "hour": 9, "yearly": True}
    )
    clock.set(datetime(2026, 3, 5, 7, 59, 55, tzinfo=UTC))  # 08:59:55 in Berlin
    async with runtime.db.write() as uow:
        # The first sweep looks back a day: yesterday's 9 am birthdays (10 contacts) fire.
        assert await fire_date_triggers(uow.session, now=clock.now()) == 10
    since = clock.now()
    clock.advance(seconds=10)
    async with runtime.db.write() as uow:
        read = await candidates(uow.session, ws, trigger, since, clock.now())
        assert await fire_date_triggers(uow.session, now=clock.now()) == 10
    # Two or three candidate days x 10 contacts per day, not 3,650 contacts.
    assert len(read) <= 40
    assert {r[2][5:] for r in read} >= {"03-05"}
    assert len(await runs_of(runtime, funnel_id)) == 20
    async with runtime.db.write() as uow:
        assert await fire_date_triggers(uow.session, now=clock.now()) == 0


async def test_each_occurrence_fires_once_at_the_local_hour_everywhere(
    runtime, tenant, clock
) -> None:
    """9 am local on the day, from Kiritimati (UTC+14) to Pago Pago (UTC-11); a 29 February
    birthday on 28 February in a common year; a one-off date seven days before a renewal."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, fields={"birthday": "date", "renewal": "date"})
    people = {
        "Pacific/Kiritimati": "1990-03-05",
        "Pacific/Pago_Pago": "1990-03-05",
        "America/New_York": "1990-03-05",
        "Europe/Berlin": "1992-02-29",
    }
    ids = {
        tz: await contact(runtime, ws, f"{i}@example.com", timezone=tz, fields={"birthday": day})
        for i, (tz, day) in enumerate(people.items())
    }
    renewing = await contact(
        runtime, ws, "r@example.com", timezone="Asia/Tokyo", fields={"renewal": "2027-03-12"}
    )
    birthdays = await tagging_funnel(
        runtime, ws, {"kind": "date_field", "field": "birthday", "hour": 9, "yearly": True}
    )
    renewals = await tagging_funnel(
        runtime, ws, {"kind": "date_field", "field": "renewal", "hour": 9, "offset_days": -7}
    )
    clock.set(datetime(2027, 2, 28, 0, 0, tzinfo=UTC))
    await _sweep_until(
        runtime, clock, datetime(2027, 3, 6, 0, 0, tzinfo=UTC), timedelta(minutes=30)
    )

    fired = await _fired(runtime, birthdays)
    assert set(fired) == set(ids.values())
    for tz, contact_id in ids.items():
        occurrence, at = fired[contact_id]
        expected_day = "2027-02-28" if tz == "Europe/Berlin" else "2027-03-05"
        assert occurrence == expected_day
        nine = datetime.fromisoformat(f"{expected_day}T09:00").replace(tzinfo=ZoneInfo(tz))
        assert timedelta(0) <= at - nine < timedelta(minutes=30), tz
    [(occurrence, at)] = (await _fired(runtime, renewals)).values()
    assert occurrence == "2027-03-05"
    tokyo_nine = datetime(2027, 3, 5, 9, 0, tzinfo=ZoneInfo("Asia/Tokyo"))
    assert timedelta(0) <= at - tokyo_nine < timedelta(minutes=30)
    assert [r.contact_id for r in await runs_of(runtime, renewals)] == [renewing]
    assert len(await runs_of(runtime, birthdays)) == 4


async def test_a_stopped_sweeper_catches_up_within_the_lookback(runtime, tenant, clock) -> None:
    """After two and a half days without a sweep, what fell due in the last day fires and an
    older occurrence does not."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, fields={"birthday": "date"})
    ann = await contact(runtime, ws, "ann@example.com", fields={"birthday": "1990-03-05"})
    await contact(runtime, ws, "bob@example.com", fields={"birthday": "1990-03-03"})
    funnel_id = await tagging_funnel(
        runtime, ws, {"kind": "date_field", "field": "birthday", "hour": 9, "yearly": True}
    )
    clock.set(datetime(2026, 3, 3, 0, 0, tzinfo=UTC))
    async with runtime.db.write() as uow:
        assert await fire_date_triggers(uow.session, now=clock.now()) == 0
    clock.set(datetime(2026, 3, 5, 14, 0, tzinfo=UTC))
    async with runtime.db.write() as uow:
        assert await fire_date_triggers(uow.session, now=clock.now()) == 1
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [ann]
