"""Deletion keeps only a keyed hash of a suppressed address (issue 19 item 3, spec §9): the
contact's address is erased everywhere, yet when the same address comes back (a re-import, an
event, the API) it is still suppressed at send time — for funnel mail and for campaigns — and
an address that was never suppressed leaves nothing behind."""

from __future__ import annotations

import hashlib
import hmac

from sqlalchemy import select

from app.db.base import Base
from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.models import R_SKIPPED, Recipient
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.contacts import erased_addresses
from app.engines.funnels.contacts.deletion import delete_contact
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import OUTBOX_SKIPPED, Contact, DeliveryEvent, ErasedAddress
from app.engines.funnels.runs.due.entry import enter
from app.settings import MailSettings
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    effects,
    email_node,
    graph,
    published,
)


async def _suppress(engine: Engine, contact_id: int, suppressed: dict[str, str]) -> None:
    async with engine.runtime.db.write() as uow:
        row = await uow.session.get(Contact, contact_id)
        assert row is not None
        row.suppressed = suppressed


async def _delete(engine: Engine, ws: int, contact_id: int) -> None:
    rt = engine.runtime
    async with rt.db.write() as uow:
        await delete_contact(
            uow.session,
            ws,
            contact_id,
            rt.clock.now(),
            address_key=rt.secrets.derive(erased_addresses.PURPOSE),
        )


async def _holds(engine: Engine, needle: str) -> list[str]:
    found = []
    async with engine.runtime.db.read() as s:
        for table in Base.metadata.sorted_tables:
            for row in (await s.execute(select(table))).mappings():
                found += [f"{table.name}.{k}" for k, v in row.items() if needle in str(v).lower()]
    return found


async def test_a_complained_address_deleted_then_reimported_is_not_mailed(
    engine: Engine, space: Space
) -> None:
    rt, ws = engine.runtime, space.workspace_id
    gone = await contact(rt, ws, "Zora.Gone@Example.com", phone="+1 555 0101")
    await _suppress(engine, gone, {"email": "complained", "sms": "stopped"})
    kept = await contact(rt, ws, "never.suppressed@example.com")
    await _delete(engine, ws, gone)
    await _delete(engine, ws, kept)

    # Only keyed hashes remain: not the address, not its plain hash.
    assert await _holds(engine, "zora") == []
    assert await _holds(engine, "never.suppressed") == []
    plain = hashlib.sha256(b"zora.gone@example.com").hexdigest()
    assert await _holds(engine, plain) == []
    async with rt.db.read() as s:
        rows = list(await s.scalars(select(ErasedAddress).order_by(ErasedAddress.kind)))
    key = rt.secrets.derive(erased_addresses.PURPOSE)
    expected = hmac.new(key, b"email:zora.gone@example.com", hashlib.sha256).hexdigest()
    assert [(r.kind, r.digest, r.suppressed) for r in rows] == [
        ("email", expected, {"email": "complained"}),
        ("phone", erased_addresses.digest(key, "phone", "+15550101"), {"sms": "stopped"}),
    ]

    # The address comes back (another spelling of it): a funnel does not mail it...
    back = await contact(rt, ws, " zora.gone@example.COM")
    other = await contact(rt, ws, "someone.else@example.com")
    _, version = await published(rt, ws, graph(email_node("hello", subject="Hello")))
    async with rt.db.write() as uow:
        for cid in (back, other):
            await enter(uow.session, version=version, contact_id=cid, now=rt.clock.now())
    await engine.drive()
    assert [m.to for m in engine.sink.snapshot()] == [["someone.else@example.com"]]
    (effect,) = await effects(rt, contact_id=back)
    assert effect.status == OUTBOX_SKIPPED
    async with rt.db.read() as s:
        detail = await s.scalar(
            select(DeliveryEvent.detail).where(DeliveryEvent.outbox_id == effect.id)
        )
    assert (
        detail == "suppressed on email: complained (kept from an erased contact with this address)"
    )

    # ... and neither does a campaign.
    engine.sink.reset()
    async with rt.db.write() as uow:
        campaign = await create_campaign(
            uow.session, ws, CampaignData(name="News", subject="News", body="News"), rt.clock.now()
        )
    async with rt.db.write() as uow:
        await materialise(uow.session, campaign.id, rt.clock.now())
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
        address_key=key,
    )
    try:
        assert await send_until_done(sender, campaign.id, engine.clock) is True
    finally:
        await pool.aclose()
    assert [m.to for m in engine.sink.snapshot()] == [["someone.else@example.com"]]
    async with rt.db.read() as s:
        status = await s.scalar(
            select(Recipient.status).where(
                Recipient.campaign_id == campaign.id, Recipient.contact_id == back
            )
        )
    assert status == R_SKIPPED
