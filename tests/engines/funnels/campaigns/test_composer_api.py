"""The campaign composer's API (issue 36): saved segments (FN-73 to FN-75), the review of a
campaign's audience after suppressions and the frequency cap (FN-76), and its preview and test
send made by the sender's own renderer (FN-77)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update

from app.engines.funnels.campaigns.models import Recipient
from app.engines.funnels.contacts.saved_segment_models import SegmentCount
from app.engines.funnels.contacts.saved_segments import take_daily_counts
from app.engines.funnels.models import Contact, FrequencyCount
from app.integrations.mail import MailSender
from app.platform.audit.models import AuditEntry
from app.settings import MailSettings
from tests.conftest import auth
from tests.engines.funnels.factories import contact, replace_funnels_deps, setup_names

API = "/api/v1/funnels"
VIP = {"kind": "has_tag", "tag": "vip"}


async def _segment(client, tenant, name="VIPs", predicate=VIP, **kw) -> dict:
    r = await client.post(
        f"{API}/saved-segments",
        json={"name": name, "predicate": predicate, **kw},
        headers=auth(tenant),
    )
    assert r.status_code == 201, r.text
    return r.json()


async def _campaign(client, tenant, **kw) -> dict:
    body = {
        "name": "Spring",
        "subject": "Hi {{first_name}}",
        "preheader": "Our best for {{first_name}}",
        "body": "Dear {{first_name}}, spring is here.",
        "html": '<p style="color:#333">Dear <b>{{first_name}}</b></p>',
        **kw,
    }
    r = await client.post(f"{API}/campaigns", json=body, headers=auth(tenant))
    assert r.status_code == 201, r.text
    return r.json()


async def test_fn73_a_saved_segment_has_a_name_a_live_count_and_a_daily_count(
    client, runtime, tenant, other_tenant
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"])
    await contact(runtime, ws, "a@example.com", tags=["vip"])
    await contact(runtime, ws, "b@example.com")
    made = await _segment(client, tenant, description="Our best customers")
    assert (made["name"], made["description"], made["count"]) == (
        "VIPs",
        "Our best customers",
        1,
    )
    await contact(runtime, ws, "c@example.com", tags=["vip"])
    listed = (await client.get(f"{API}/saved-segments", headers=auth(tenant))).json()
    assert [(s["name"], s["count"]) for s in listed] == [("VIPs", 2)]

    # Counted once a day by the sweep: a second tick the same day keeps the day's count.
    async with runtime.db.write() as uow:
        assert await take_daily_counts(uow.session, runtime.clock.now()) == 1
    await contact(runtime, ws, "d@example.com", tags=["vip"])
    async with runtime.db.write() as uow:
        assert await take_daily_counts(uow.session, runtime.clock.now()) == 0
    runtime.clock.advance(86400)
    async with runtime.db.write() as uow:
        assert await take_daily_counts(uow.session, runtime.clock.now()) == 1
    one = (await client.get(f"{API}/saved-segments/{made['id']}", headers=auth(tenant))).json()
    assert [h["count"] for h in one["history"]] == [2, 3]
    assert one["used_by"] == []
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(SegmentCount)) == 2

    renamed = await client.patch(
        f"{API}/saved-segments/{made['id']}",
        json={"name": "Top customers", "description": ""},
        headers=auth(tenant),
    )
    assert renamed.json()["name"] == "Top customers"
    # Another workspace sees none of it.
    foreign = await client.get(f"{API}/saved-segments/{made['id']}", headers=auth(other_tenant))
    assert foreign.status_code == 404


async def test_fn73_bad_segments_are_refused_naming_the_field(client, runtime, tenant) -> None:
    await _segment(client, tenant, predicate={"kind": "field", "field": "email", "op": "exists"})
    cases = [
        ({"name": "VIPs", "predicate": {"kind": "all", "predicates": []}}, "predicate"),
        (
            {"name": "x", "predicate": {"kind": "field", "field": "nope", "op": "exists"}},
            "predicate",
        ),
        ({"name": "  ", "predicate": VIP}, "name"),
        (
            {"name": "VIPs", "predicate": {"kind": "field", "field": "email", "op": "exists"}},
            "name",
        ),
        ({"name": "y", "predicate": {"kind": "segment", "segment_id": 999999}}, "predicate"),
    ]
    for body, field in cases:
        r = await client.post(f"{API}/saved-segments", json=body, headers=auth(tenant))
        assert r.status_code == 422, (body, r.text)
        assert r.json()["details"][0]["field"] == field, (body, r.text)


async def test_fn74_a_campaign_audience_and_a_funnel_use_a_saved_segment(
    client, runtime, tenant
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"])
    await contact(runtime, ws, "a@example.com", tags=["vip"], first_name="Ann")
    await contact(runtime, ws, "b@example.com")
    seg = await _segment(client, tenant)
    campaign = await _campaign(
        client, tenant, audience={"kind": "segment", "segment_id": seg["id"]}
    )
    # Stored with the segment's conditions bound in: the sender needs no lookup.
    assert campaign["audience"]["predicate"] == VIP
    review = (
        await client.get(f"{API}/campaigns/{campaign['id']}/review", headers=auth(tenant))
    ).json()
    assert review["matched"] == 1

    definition: dict[str, Any] = {
        "nodes": [{"kind": "add_tag", "id": "t", "tag": "vip", "entry": True}],
        "triggers": [
            {
                "kind": "segment_enter",
                "predicate": {"kind": "segment", "segment_id": seg["id"]},
            }
        ],
    }
    r = await client.post(
        f"{API}", json={"name": "Welcome VIPs", "definition": definition}, headers=auth(tenant)
    )
    assert r.status_code == 201, r.text
    funnel_id = r.json()["id"]
    published = await client.post(f"{API}/{funnel_id}/publish", headers=auth(tenant))
    assert published.status_code == 201, published.text
    # A reference to a segment that does not exist is named by the validator.
    definition["triggers"][0]["predicate"]["segment_id"] = 424242
    await client.patch(f"{API}/{funnel_id}", json={"definition": definition}, headers=auth(tenant))
    found = (await client.post(f"{API}/{funnel_id}/validate", headers=auth(tenant))).json()
    assert not found["valid"]
    assert any("saved segment 424242 does not exist" in p["message"] for p in found["problems"])


async def test_fn75_deleting_a_segment_in_use_is_refused_naming_its_users(
    client, runtime, tenant
) -> None:
    await setup_names(runtime, tenant.workspace_id, tags=["vip"])
    seg = await _segment(client, tenant)
    ref = {"kind": "segment", "segment_id": seg["id"]}
    campaign = await _campaign(client, tenant, name="Spring", audience=ref)
    definition = {
        "nodes": [{"kind": "add_tag", "id": "t", "tag": "vip", "entry": True}],
        "triggers": [{"kind": "segment_enter", "predicate": ref}],
    }
    r = await client.post(
        f"{API}", json={"name": "Welcome", "definition": definition}, headers=auth(tenant)
    )
    funnel_id = r.json()["id"]
    refused = await client.delete(f"{API}/saved-segments/{seg['id']}", headers=auth(tenant))
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "segment_in_use"
    assert 'campaign "Spring"' in refused.json()["message"]
    assert 'funnel "Welcome"' in refused.json()["message"]

    await client.post(f"{API}/campaigns/{campaign['id']}/cancel", headers=auth(tenant))
    definition["triggers"] = [{"kind": "manual"}]
    await client.patch(f"{API}/{funnel_id}", json={"definition": definition}, headers=auth(tenant))
    gone = await client.delete(f"{API}/saved-segments/{seg['id']}", headers=auth(tenant))
    assert gone.status_code == 204, gone.text


async def test_fn76_review_states_the_audience_after_suppressions_and_the_cap(
    client, runtime, tenant
) -> None:
    ws = tenant.workspace_id
    ids = [await contact(runtime, ws, f"c{i}@example.com") for i in range(5)]
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Contact).where(Contact.id == ids[0]).values(suppressed={"email": "bounced"})
        )
        await uow.session.execute(
            update(Contact).where(Contact.id == ids[1]).values(suppressed={"email": "unsubscribed"})
        )
    await client.put(f"{API}/frequency-cap", json={"per_day": 1}, headers=auth(tenant))
    today = runtime.clock.now().date().isoformat()
    async with runtime.db.write() as uow:
        uow.session.add(
            FrequencyCount(
                contact_id=ids[2],
                period=f"d{today}",
                workspace_id=ws,
                sent=1,
                until=runtime.clock.now() + timedelta(hours=1),
            )
        )
    campaign = await _campaign(client, tenant)
    review = (
        await client.get(f"{API}/campaigns/{campaign['id']}/review", headers=auth(tenant))
    ).json()
    assert review["matched"] == 5
    assert sum(review["held_back"].values()) == 2
    assert review["capped"] == 1
    assert review["cap_per_day"] == 1
    assert review["will_send"] == 2


async def test_fn76_a_campaign_is_editable_until_it_starts(client, runtime, tenant) -> None:
    await contact(runtime, tenant.workspace_id, "a@example.com")
    campaign = await _campaign(client, tenant)
    edited = {"name": "Spring", "subject": "New subject", "body": "New body", "preheader": "P"}
    r = await client.patch(f"{API}/campaigns/{campaign['id']}", json=edited, headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert (r.json()["subject"], r.json()["preheader"]) == ("New subject", "P")
    await client.post(f"{API}/campaigns/{campaign['id']}/audience", headers=auth(tenant))
    late = await client.patch(
        f"{API}/campaigns/{campaign['id']}", json=edited, headers=auth(tenant)
    )
    assert late.status_code == 409
    assert late.json()["code"] == "campaign_not_editable"


async def test_fn77_preview_renders_what_the_sender_sends(client, runtime, tenant) -> None:
    ann = await contact(runtime, tenant.workspace_id, "ann@example.com", first_name="Ann")
    campaign = await _campaign(client, tenant)
    r = await client.post(
        f"{API}/campaigns/{campaign['id']}/preview",
        json={"contact_id": ann},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    shown = r.json()
    assert shown["subject"] == "Hi Ann"
    assert shown["text"].startswith("Dear Ann, spring is here.")
    assert "Our best for Ann" in shown["html"]
    assert "Dear <b>Ann</b>" in shown["html"]
    blank = await client.post(
        f"{API}/campaigns/{campaign['id']}/preview", json={}, headers=auth(tenant)
    )
    assert blank.json()["subject"] == "Hi "


async def test_fn77_a_test_send_reaches_the_mail_server_marked_and_counted_nowhere(
    client, runtime, tenant, other_tenant, sink
) -> None:
    ws = tenant.workspace_id
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="f@test.example")
    replace_funnels_deps(runtime, trial_mail=MailSender(mail))
    campaign = await _campaign(client, tenant)
    r = await client.post(
        f"{API}/campaigns/{campaign['id']}/test-send",
        json={"to": ["boss@example.com", "pal@example.com"], "contact_id": ann},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    assert r.json()["sent"] == ["boss@example.com", "pal@example.com"]
    got = sorted(sink.messages, key=lambda m: m.to[0])
    assert [m.to for m in got] == [["boss@example.com"], ["pal@example.com"]]
    for message in got:
        assert message.subject == "[Test] Hi Ann"
        assert message.headers["X-Sweepline-Test"] == "1"
        assert message.headers["X-Sweepline-Campaign"] == str(campaign["id"])
        assert "/t/u/test-message" in message.headers["List-Unsubscribe"]
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(Recipient)) == 0
    shown = (await client.get(f"{API}/campaigns/{campaign['id']}", headers=auth(tenant))).json()
    assert shown["counters"]["sent"] == 0
    assert shown["status"] == "draft"
    async with runtime.db.read() as s:
        [entry] = await s.scalars(
            select(AuditEntry).where(AuditEntry.action == "campaign.test_sent")
        )
    assert entry.after == {"name": "Spring", "addresses": 2}

    # An address the workspace must not mail is refused, and nothing is sent.
    gone = await contact(runtime, ws, "gone@example.com")
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Contact).where(Contact.id == gone).values(suppressed={"email": "complained"})
        )
    before = len(sink.messages)
    refused = await client.post(
        f"{API}/campaigns/{campaign['id']}/test-send",
        json={"to": ["ok@example.com", "gone@example.com"]},
        headers=auth(tenant),
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "recipient_suppressed"
    assert len(sink.messages) == before
    too_many = await client.post(
        f"{API}/campaigns/{campaign['id']}/test-send",
        json={"to": [f"x{i}@example.com" for i in range(6)]},
        headers=auth(tenant),
    )
    assert too_many.status_code == 422
    foreign = await client.post(
        f"{API}/campaigns/{campaign['id']}/test-send",
        json={"to": ["boss@example.com"]},
        headers=auth(other_tenant),
    )
    assert foreign.status_code == 404


async def test_fn76_a_campaign_cancelled_while_sending_sends_no_more(
    client, runtime, tenant, sink
) -> None:
    from app.engines.funnels.campaigns.work.sender import CampaignSender
    from app.engines.funnels.campaigns.work.transport import SmtpPool
    from app.engines.funnels.events.tracking import Tracking

    for i in range(5):
        await contact(runtime, tenant.workspace_id, f"c{i}@example.com")
    campaign = await _campaign(client, tenant, rate_per_minute=2)
    await client.post(f"{API}/campaigns/{campaign['id']}/audience", headers=auth(tenant))
    mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="n@test.example")
    pool = SmtpPool(mail, 1)
    sender = CampaignSender(
        runtime.db,
        pool,
        owner="test-sender",
        domain="test.example",
        in_flight=1,
        signing=Tracking(runtime.settings.web.public_url, "campaign-test-secret"),
    )
    try:
        claimed = await sender.claim(campaign["id"], runtime.clock.now())
        assert claimed is not None
        first = await sender.step(claimed, runtime.clock.now)
        assert first.sent == 2
        cancelled = await client.post(
            f"{API}/campaigns/{campaign['id']}/cancel", headers=auth(tenant)
        )
        assert cancelled.json()["status"] == "cancelled"
        second = await sender.step(claimed, runtime.clock.now)
        assert second.sent == 0
    finally:
        await pool.aclose()
    assert len(sink.messages) == 2
    shown = (await client.get(f"{API}/campaigns/{campaign['id']}", headers=auth(tenant))).json()
    assert shown["status"] == "cancelled"
    assert (shown["counters"]["sent"], shown["counters"]["pending"]) == (2, 3)
