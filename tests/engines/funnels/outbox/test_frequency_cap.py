"""The workspace's frequency cap (issue 19 item 5): at most N marketing messages per contact per
day / week across every funnel and campaign, checked at send time; a capped funnel message waits
for the contact's next day or is skipped, as its funnel says, and the step records which. On a
ManualClock across the contact's midnight, with a campaign and two funnels competing for the same
contact, mail counted at a real SMTP server (aiosmtpd)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.models import R_SENT, R_SKIPPED, Recipient
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import (
    OUTBOX_PENDING,
    OUTBOX_SENT,
    OUTBOX_SKIPPED,
    DeliveryEvent,
    FunnelVersion,
)
from app.engines.funnels.outbox.work import frequency
from app.engines.funnels.runs.due.entry import enter
from app.settings import MailSettings
from tests.conftest import auth
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    effects,
    email_node,
    graph,
    node,
    published,
    runs_of,
    steps_of,
)
from tests.factories import Tenant

# 21:00 on Monday 2 March in New York (UTC-5): the contact's midnight is 05:00 UTC.
EVENING = datetime(2026, 3, 3, 2, 0, tzinfo=UTC)
MIDNIGHT = datetime(2026, 3, 3, 5, 0, tzinfo=UTC)


async def _cap(engine: Engine, ws: int, **cap: int | None) -> None:
    async with engine.runtime.db.write() as uow:
        await frequency.set_cap(uow.session, ws, frequency.Cap(**cap), engine.clock.now())


async def _enter(engine: Engine, version: FunnelVersion, contact_id: int) -> None:
    async with engine.runtime.db.write() as uow:
        await enter(uow.session, version=version, contact_id=contact_id, now=engine.clock.now())
    await engine.drive()


async def _campaign(engine: Engine, ws: int, name: str) -> tuple[int, str]:
    """Send a campaign to the workspace (its only contact); the recipient's status and why."""
    rt, clock = engine.runtime, engine.clock
    async with rt.db.write() as uow:
        campaign = await create_campaign(
            uow.session, ws, CampaignData(name=name, subject=name, body="News"), clock.now()
        )
    async with rt.db.write() as uow:
        await materialise(uow.session, campaign.id, clock.now())
    mail = MailSettings(
        smtp_host=engine.sink.host, smtp_port=engine.sink.port, from_address="n@test.example"
    )
    pool = SmtpPool(mail, 2)
    sender = CampaignSender(
        rt.db,
        pool,
        owner="test-campaign",
        domain="test.example",
        signing=Tracking(rt.settings.web.public_url, "campaign-test-secret"),
    )
    try:
        assert await send_until_done(sender, campaign.id, clock) is True
    finally:
        await pool.aclose()
    async with rt.db.read() as s:
        recipient = await s.scalar(select(Recipient).where(Recipient.campaign_id == campaign.id))
    assert recipient is not None
    return campaign.id, recipient.status


def _subjects(engine: Engine) -> list[str]:
    return [m.subject for m in engine.sink.snapshot()]


async def test_cap_per_day_across_a_campaign_and_two_funnels_over_the_contacts_midnight(
    engine: Engine, space: Space, clock: ManualClock
) -> None:
    rt, ws = engine.runtime, space.workspace_id
    clock.set(EVENING)
    await _cap(engine, ws, per_day=2)
    who = await contact(rt, ws, "nyc@x.test", timezone="America/New_York")
    _, waits = await published(
        rt,
        ws,
        graph(
            email_node("a1", subject="A one", next="pause"),
            node("wait", "pause", hours=1, next="a2"),
            email_node("a2", subject="A two"),
        ),
        name="A",
    )
    b_id, skips = await published(
        rt,
        ws,
        {**graph(email_node("b1", subject="B one")), "settings": {"when_capped": "skip"}},
        name="B",
    )

    # 21:00 local: funnel A's first message and a campaign use the day's two.
    await _enter(engine, waits, who)
    _, status = await _campaign(engine, ws, "C one")
    assert status == R_SENT
    assert _subjects(engine) == ["A one", "C one"]

    # Funnel B (skip when capped): its message is skipped, and its step says so.
    await _enter(engine, skips, who)
    (b1,) = await effects(rt, node_id="b1")
    assert b1.status == OUTBOX_SKIPPED
    (b_run,) = await runs_of(rt, b_id)
    (b_step,) = [s for s in await steps_of(rt, b_run.id) if s.node_id == "b1"]
    assert b_step.output["frequency_cap"] == {"action": "skipped", "at": EVENING.isoformat()}
    assert "skipped" in b_step.decision

    # 22:00 local: funnel A's second message (wait when capped) waits for the contact's midnight.
    await engine.advance(hours=1)
    (a2,) = await effects(rt, node_id="a2")
    assert (a2.status, a2.next_attempt_at) == (OUTBOX_PENDING, MIDNIGHT)
    (a_run,) = await runs_of(rt, waits.funnel_id)
    (a_step,) = [s for s in await steps_of(rt, a_run.id) if s.node_id == "a2"]
    assert a_step.output["frequency_cap"] == {"action": "waits", "until": MIDNIGHT.isoformat()}
    assert "waits" in a_step.decision

    # 23:00 local: another campaign is capped too (a broadcast does not wait: it is skipped).
    await engine.advance(hours=1)
    _, status = await _campaign(engine, ws, "C two")
    assert status == R_SKIPPED
    assert _subjects(engine) == ["A one", "C one"]
    async with rt.db.read() as s:
        kinds = list(
            await s.scalars(
                select(DeliveryEvent.kind)
                .where(DeliveryEvent.outbox_id.in_([b1.id, a2.id]))
                .order_by(DeliveryEvent.id)
            )
        )
    assert kinds == ["capped", "capped"]

    # 23:59 local: still the same day; nothing goes.
    clock.set(MIDNIGHT - timedelta(minutes=1))
    await engine.drive()
    assert _subjects(engine) == ["A one", "C one"]

    # 00:00 local: a new day — the waiting message goes, once.
    clock.set(MIDNIGHT)
    await engine.drive()
    assert _subjects(engine) == ["A one", "C one", "A two"]
    (a2,) = await effects(rt, node_id="a2")
    assert a2.status == OUTBOX_SENT


async def test_cap_per_week_and_transactional_mail_is_not_counted(
    engine: Engine, space: Space, clock: ManualClock
) -> None:
    rt, ws = engine.runtime, space.workspace_id
    clock.set(datetime(2026, 3, 8, 12, 0, tzinfo=UTC))  # Sunday noon, contact in UTC
    await _cap(engine, ws, per_week=1)
    who = await contact(rt, ws, "utc@x.test", timezone="UTC")
    _, receipts = await published(
        rt,
        ws,
        {**graph(email_node("r", subject="Receipt")), "settings": {"transactional": True}},
        name="Receipts",
    )
    _, news = await published(
        rt,
        ws,
        graph(
            email_node("n1", subject="News one", next="pause"),
            node("wait", "pause", hours=1, next="n2"),
            email_node("n2", subject="News two"),
        ),
        name="News",
    )
    await _enter(engine, receipts, who)
    await _enter(engine, news, who)
    assert _subjects(engine) == ["Receipt", "News one"]
    await engine.advance(hours=1)
    (n2,) = await effects(rt, node_id="n2")
    monday = datetime(2026, 3, 9, 0, 0, tzinfo=UTC)
    assert (n2.status, n2.next_attempt_at) == (OUTBOX_PENDING, monday)
    clock.set(monday)
    await engine.drive()
    assert _subjects(engine) == ["Receipt", "News one", "News two"]


def test_periods_are_the_contacts_calendar_day_and_iso_week() -> None:
    cap = frequency.Cap(per_day=3, per_week=10)
    # Sunday 8 March 23:30 in Berlin (UTC+1) is 22:30 UTC.
    day, week = frequency.periods(cap, datetime(2026, 3, 8, 22, 30, tzinfo=UTC), "Europe/Berlin")
    assert (day.key, day.ends) == ("d2026-03-08", datetime(2026, 3, 8, 23, 0, tzinfo=UTC))
    assert (week.key, week.ends) == ("w2026-10", datetime(2026, 3, 8, 23, 0, tzinfo=UTC))
    assert frequency.periods(frequency.Cap(), datetime(2026, 3, 8, tzinfo=UTC), "UTC") == []


async def test_frequency_cap_api(client: httpx.AsyncClient, tenant: Tenant) -> None:
    url = "/api/v1/funnels/frequency-cap"
    headers = auth(tenant)
    r = await client.get(url, headers=headers)
    assert r.json() == {"per_day": None, "per_week": None}
    r = await client.put(url, json={"per_day": 2, "per_week": 5}, headers=headers)
    assert (r.status_code, r.json()) == (200, {"per_day": 2, "per_week": 5})
    assert (await client.get(url, headers=headers)).json() == {"per_day": 2, "per_week": 5}
    r = await client.put(url, json={"per_day": 0}, headers=headers)
    assert r.status_code in (400, 422)
    assert (await client.get(url, headers=headers)).json() == {"per_day": 2, "per_week": 5}


async def test_counts_of_periods_ended_over_a_day_ago_are_pruned(
    engine: Engine, space: Space, clock: ManualClock
) -> None:
    rt, ws = engine.runtime, space.workspace_id
    who = await contact(rt, ws, "p@x.test", timezone="UTC")
    caps = {ws: frequency.Cap(per_day=1)}
    async with rt.db.write() as uow:
        want = frequency.Want("m", ws, who, "UTC")
        assert await frequency.reserve(uow.session, caps, [want], clock.now()) == {}
    assert await frequency.prune(rt.db, clock.now() + timedelta(days=1)) == 0
    assert await frequency.prune(rt.db, clock.now() + timedelta(days=2, hours=1)) == 1
