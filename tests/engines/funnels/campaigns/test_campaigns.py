"""Campaigns (FN-28 to FN-30): the audience is materialised once; contacts joining during the send
are not added; suppression at send time; the rate limit; counters recomputed from delivery
events, so duplicated webhooks cannot inflate them."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import select

from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.jobs import start_due
from app.engines.funnels.campaigns.models import Campaign, Recipient
from app.engines.funnels.campaigns.records.counters import counters
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import Contact
from app.settings import MailSettings
from tests.conftest import auth, eventually
from tests.engines.funnels.factories import bulk_contacts, contact, settle, setup_names


def _sender(runtime, sink, **kw) -> tuple[CampaignSender, SmtpPool]:
    mail = MailSettings(
        smtp_host=sink.host,
        smtp_port=sink.port,
        from_address="news@test.example",
        timeout_seconds=5,
    )
    pool = SmtpPool(mail, 4)
    sender = CampaignSender(
        runtime.db,
        pool,
        owner="test-sender",
        domain="test.example",
        in_flight=4,
        **{"signing": Tracking(runtime.settings.web.public_url, "campaign-test-secret"), **kw},
    )
    return sender, pool


async def _campaign(client, tenant, **kw) -> dict:
    body = {
        "name": "March news",
        "subject": "News for {{first_name}}",
        "body": "Hello {{first_name}}",
        **kw,
    }
    r = await client.post("/api/v1/funnels/campaigns", json=body, headers=auth(tenant))
    assert r.status_code == 201, r.text
    return r.json()


async def test_fn28_audience_is_materialised_once(client, runtime, tenant, other_tenant) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["news"])
    for i in range(3):
        await contact(runtime, ws, f"c{i}@example.com", tags=["news"])
    await contact(runtime, ws, "other@example.com")
    c = await _campaign(client, tenant, audience={"kind": "has_tag", "tag": "news"})
    first = await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    assert first.status_code == 200, first.text
    assert first.json()["audience_size"] == 3
    assert first.json()["status"] == "sending"
    second = await client.post(
        f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant)
    )
    assert second.status_code == 409
    assert second.json()["code"] == "audience_already_materialised"
    foreign = await client.post(
        f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(other_tenant)
    )
    assert foreign.status_code == 404
    edit = await client.patch(
        f"/api/v1/funnels/campaigns/{c['id']}",
        json={"name": "x", "subject": "s", "body": "b"},
        headers=auth(tenant),
    )
    assert edit.status_code == 409
    async with runtime.db.read() as s:
        seqs = list(
            await s.scalars(
                select(Recipient.seq)
                .where(Recipient.campaign_id == c["id"])
                .order_by(Recipient.seq)
            )
        )
    assert seqs == [1, 2, 3]


async def test_fn28_fn30_joiners_not_added_and_suppression_checked_at_send_time(
    client, runtime, tenant, sink, clock
) -> None:
    ws = tenant.workspace_id
    ids = [await contact(runtime, ws, f"c{i}@example.com", first_name=f"N{i}") for i in range(5)]
    c = await _campaign(
        client, tenant, html='<p>Hi <a href="https://shop.example/sale">sale</a></p>'
    )
    r = await client.post(
        f"/api/v1/funnels/campaigns/{c['id']}/schedule",
        json={"send_at": (clock.now() + timedelta(hours=1)).isoformat()},
        headers=auth(tenant),
    )
    assert r.json()["status"] == "scheduled"
    assert await start_due(runtime.context(), clock.now()) == []  # not due yet
    clock.advance(hours=1)
    assert await start_due(runtime.context(), clock.now()) == [c["id"]]
    # After the snapshot: one contact joins, one unsubscribes, one is deleted.
    await contact(runtime, ws, "joiner@example.com")
    async with runtime.db.write() as uow:
        unsub = await uow.session.get(Contact, ids[1])
        unsub.suppressed = {"email": "unsubscribed"}
        gone = await uow.session.get(Contact, ids[2])
        gone.deleted_at = clock.now()
        gone.email = None
    sender, pool = _sender(
        runtime, sink, tracking=Tracking("http://testserver", tenant.webhook_secret)
    )
    try:
        assert await send_until_done(sender, c["id"], clock) is True
    finally:
        await pool.aclose()
    got = sorted(m.to[0] for m in sink.snapshot())
    assert got == ["c0@example.com", "c3@example.com", "c4@example.com"]
    message = next(m for m in sink.snapshot() if m.to == ["c0@example.com"])
    assert message.subject == "News for N0"
    assert message.message_id == f"<c{c['id']}.r1.w{ws}@test.example>"
    assert "/t/l/" in (message.html or "")
    assert "/t/o/" in (message.html or "")
    shown = (await client.get(f"/api/v1/funnels/campaigns/{c['id']}", headers=auth(tenant))).json()
    assert shown["status"] == "done"
    assert shown["progress"] == 1.0
    assert shown["counters"]["sent"] == 3
    assert shown["counters"]["skipped"] == 2
    assert shown["checkpoint"] == 5


async def test_fn30_rate_limit_per_campaign(client, runtime, tenant, sink, clock) -> None:
    ws = tenant.workspace_id
    for i in range(7):
        await contact(runtime, ws, f"c{i}@example.com")
    c = await _campaign(client, tenant, rate_per_minute=3)
    await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    sender, pool = _sender(runtime, sink)
    try:
        campaign = await sender.claim(c["id"], clock.now())
        assert campaign is not None
        first = await sender.step(campaign, clock.now)
        assert first.sent == 3
        assert first.next_at == clock.now() + timedelta(seconds=60)
        assert len(sink.snapshot()) == 3
        clock.advance(seconds=60)
        assert (await sender.step(campaign, clock.now)).sent == 3
        clock.advance(seconds=60)
        last = await sender.step(campaign, clock.now)
        assert last.sent == 1
        assert (await sender.step(campaign, clock.now)).done
    finally:
        await pool.aclose()
    assert sorted(sink.count_by_message_id().values()) == [1] * 7


async def test_fn30_a_send_stops_after_its_time_on_the_clock_and_the_next_goes_on(
    client, runtime, tenant, sink, clock
) -> None:
    """FN-30: a sender job sends for ``max_seconds`` of the runtime's clock, counting the pauses
    of the rate limit, then releases the campaign; the next sender job finishes it, each contact
    getting one message."""
    for i in range(7):
        await contact(runtime, tenant.workspace_id, f"c{i}@example.com")
    c = await _campaign(client, tenant, rate_per_minute=3)
    await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    sender, pool = _sender(runtime, sink)
    try:
        sending = asyncio.create_task(send_until_done(sender, c["id"], clock, max_seconds=30))

        async def paused() -> bool:
            return clock.sleepers == 1

        await eventually(paused)  # the first minute's three went out; it waits for the next
        assert len(sink.snapshot()) == 3
        clock.advance(seconds=60)
        # 60 s on the clock since it began: out of time, whatever the real time was.
        assert await asyncio.wait_for(sending, timeout=10) is False
        assert len(sink.snapshot()) == 6
        async with runtime.db.read() as s:
            campaign = await s.get(Campaign, c["id"])
            assert campaign is not None
            assert campaign.status == "sending"
            assert campaign.lease_owner is None  # released for the next sender job
        assert await send_until_done(sender, c["id"], clock) is True
    finally:
        await pool.aclose()
    assert sorted(sink.count_by_message_id().values()) == [1] * 7


async def test_fn30_a_fast_campaigns_step_ends_between_groups_when_the_job_is_out_of_time(
    client, runtime, tenant, sink, clock
) -> None:
    """FN-30: at a high rate one step is a whole minute's worth of mail, longer than a sender
    job may run; past ``stop_at`` the step ends after the group it was sending (every outcome
    committed), not in the middle of one, and the next step goes on from there."""
    await bulk_contacts(runtime, tenant.workspace_id, 300)
    c = await _campaign(client, tenant, rate_per_minute=100_000)
    async with runtime.db.write() as uow:  # the whole snapshot at once (no bulk job to drive)
        assert await materialise(uow.session, c["id"], clock.now()) == 300
    sender, pool = _sender(runtime, sink)
    try:
        campaign = await sender.claim(c["id"], clock.now())
        assert campaign is not None
        first = await sender.step(campaign, clock.now, stop_at=clock.now())
        assert (first.sent, first.done, first.next_at) == (256, False, clock.now())
        assert len(sink.snapshot()) == 256
        async with runtime.db.read() as s:
            row = await s.get(Campaign, c["id"])
            assert row is not None
            assert row.checkpoint == 256
        assert (await sender.step(campaign, clock.now)).sent == 44
        assert (await sender.step(campaign, clock.now)).done
    finally:
        await pool.aclose()
    assert sorted(sink.count_by_message_id().values()) == [1] * 300


async def test_fn29_counters_recomputed_from_delivery_events(
    client, runtime, tenant, sink, clock
) -> None:
    """FN-29: a duplicated delivery webhook (same id, or the same report under a new id) does not
    inflate the counters; a bounce suppresses the address."""
    ws = tenant.workspace_id
    for i in range(3):
        await contact(runtime, ws, f"c{i}@example.com")
    c = await _campaign(client, tenant)
    await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    sender, pool = _sender(runtime, sink)
    try:
        assert await send_until_done(sender, c["id"], clock)
    finally:
        await pool.aclose()
    mid = {m.to[0]: m.message_id for m in sink.snapshot()}
    headers = {"X-Ingest-Token": tenant.ingest_token}
    reports = [
        {"event_id": "d1", "kind": "opened", "message_id": mid["c0@example.com"]},
        {
            "event_id": "d1",
            "kind": "opened",
            "message_id": mid["c0@example.com"],
        },  # retried webhook
        {
            "event_id": "d2",
            "kind": "opened",
            "message_id": mid["c0@example.com"],
        },  # same open, new id
        {
            "event_id": "d3",
            "kind": "clicked",
            "message_id": mid["c1@example.com"],
            "url": "https://x.example",
        },
        {"event_id": "d4", "kind": "delivered", "message_id": mid["c2@example.com"]},
        {"event_id": "d5", "kind": "bounced", "message_id": mid["c2@example.com"]},
        {"event_id": "d5", "kind": "bounced", "message_id": mid["c2@example.com"]},
    ]
    for report in reports:
        r = await client.post("/hooks/funnels/delivery", json=report, headers=headers)
        assert r.status_code == 202, r.text
    await settle(runtime)
    async with runtime.db.read() as s:
        counts = await counters(s, c["id"])
        bounced = await s.scalar(select(Contact).where(Contact.email == "c2@example.com"))
    assert (counts.sent, counts.delivered, counts.opened, counts.clicked, counts.bounced) == (
        3,
        1,
        2,
        1,
        1,
    )
    assert bounced is not None
    assert bounced.suppressed == {"email": "bounced"}


async def test_campaign_input_is_validated(client, runtime, tenant) -> None:
    r = await client.post(
        "/api/v1/funnels/campaigns",
        json={"name": "x", "subject": "", "body": "b"},
        headers=auth(tenant),
    )
    assert r.status_code == 422
    r = await client.post(
        "/api/v1/funnels/campaigns",
        json={"name": "x", "subject": "s", "body": "b", "audience": {"kind": "nope"}},
        headers=auth(tenant),
    )
    assert r.status_code in (400, 422)
    async with runtime.db.read() as s:
        assert list(await s.scalars(select(Campaign))) == []


async def test_a_campaign_audience_is_checked_against_the_workspace_fields(
    client, runtime, tenant
) -> None:
    """The audience is held to the same rules as a segment: a value that is not of its field's
    type, or a field the workspace does not have, is a 422 naming it, at create and at edit,
    and nothing is stored (a number field compared with text used to fail the snapshot)."""
    r = await client.post(
        "/api/v1/funnels/fields", json={"key": "score", "type": "number"}, headers=auth(tenant)
    )
    assert r.status_code == 201, r.text
    base = {"name": "x", "subject": "s", "body": "b"}
    for audience, says in (
        ({"kind": "field", "field": "score", "op": "eq", "value": "abc"}, "is not a number"),
        ({"kind": "field", "field": "nowhere", "op": "eq", "value": "a"}, "unknown field"),
        ({"kind": "field", "field": "email", "op": "gt", "value": "a"}, "does not apply"),
    ):
        r = await client.post(
            "/api/v1/funnels/campaigns", json={**base, "audience": audience}, headers=auth(tenant)
        )
        assert r.status_code == 422, r.text
        assert r.json()["details"][0]["field"] == "audience"
        assert says in r.json()["details"][0]["message"]
    async with runtime.db.read() as s:
        assert list(await s.scalars(select(Campaign))) == []

    good = {"kind": "field", "field": "score", "op": "gte", "value": 3}
    c = await _campaign(client, tenant, audience=good)
    bad = {
        "kind": "not",
        "predicate": {"kind": "field", "field": "score", "op": "lt", "value": "x"},
    }
    r = await client.patch(
        f"/api/v1/funnels/campaigns/{c['id']}",
        json={**base, "audience": bad},
        headers=auth(tenant),
    )
    assert r.status_code == 422, r.text
    snap = await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    assert snap.status_code == 200, snap.text
    assert snap.json()["audience"] == good


async def test_a_stored_audience_that_no_longer_fits_answers_422_at_the_snapshot(
    client, runtime, tenant
) -> None:
    """An audience stored before it was checked (or whose field came to exist later with another
    type) is refused with its problems when the snapshot is asked for: no 500, nothing taken."""
    c = await _campaign(client, tenant)
    r = await client.post(
        "/api/v1/funnels/fields", json={"key": "score", "type": "number"}, headers=auth(tenant)
    )
    assert r.status_code == 201, r.text
    async with runtime.db.write() as uow:
        campaign = await uow.session.get(Campaign, c["id"])
        assert campaign is not None
        campaign.audience = {"kind": "field", "field": "score", "op": "eq", "value": "abc"}
    snap = await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    assert snap.status_code == 422, snap.text
    assert "is not a number" in snap.json()["details"][0]["message"]
    shown = await client.get(f"/api/v1/funnels/campaigns/{c['id']}", headers=auth(tenant))
    assert shown.json()["status"] == "draft"
    assert shown.json()["audience_size"] == 0


async def test_a_campaign_cancelled_before_its_snapshot_is_never_sent(
    client, runtime, tenant
) -> None:
    """The snapshot claims a campaign only from the states the campaign machine lets reach
    ``materialising`` (draft, scheduled): a cancelled one stays cancelled, with no recipients."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["news"])
    await contact(runtime, ws, "c0@example.com", tags=["news"])
    c = await _campaign(client, tenant, audience={"kind": "has_tag", "tag": "news"})
    cancelled = await client.post(
        f"/api/v1/funnels/campaigns/{c['id']}/cancel", headers=auth(tenant)
    )
    assert cancelled.json()["status"] == "cancelled"
    snapshot = await client.post(
        f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant)
    )
    assert snapshot.status_code == 409
    assert snapshot.json()["code"] == "audience_already_materialised"
    async with runtime.db.read() as session:
        campaign = await session.get(Campaign, c["id"])
        recipients = list(
            await session.scalars(select(Recipient).where(Recipient.campaign_id == c["id"]))
        )
    assert campaign is not None
    assert campaign.status == "cancelled"
    assert recipients == []
