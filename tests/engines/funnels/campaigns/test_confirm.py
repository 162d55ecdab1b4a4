"""Confirming a campaign's group of sends (FN-30): the recipients are marked sent and the checkpoint
moves past every settled recipient, whatever order the group's outcomes came in; a sender that lost
the campaign's lease writes nothing. On PostgreSQL such a group is one statement written alone; on
SQLite a transaction: the suite runs on both."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.models import R_PENDING, R_SENT, Campaign, Recipient
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.campaigns.work.sender import CampaignSender
from tests.engines.funnels.factories import bulk_contacts


class NoTransport:
    async def send(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("confirming sends nothing")


async def _claimed(runtime, tenant, clock) -> tuple[CampaignSender, Campaign]:
    await bulk_contacts(runtime, tenant.workspace_id, 3)
    async with runtime.db.write() as uow:
        made = await create_campaign(
            uow.session,
            tenant.workspace_id,
            CampaignData(name="n", subject="s", body="b"),
            clock.now(),
        )
        assert await materialise(uow.session, made.id, clock.now()) == 3
    sender = CampaignSender(runtime.db, NoTransport(), owner="me", domain="test.example")  # type: ignore[arg-type]
    campaign = await sender.claim(made.id, clock.now())
    assert campaign is not None
    return sender, campaign


async def _stored(runtime, campaign_id: int) -> tuple[Campaign, dict[int, tuple[str, object]]]:
    async with runtime.db.read() as s:
        row = await s.get(Campaign, campaign_id)
        assert row is not None
        recipients = {
            r.seq: (r.status, r.sent_at)
            for r in await s.scalars(select(Recipient).where(Recipient.campaign_id == campaign_id))
        }
    return row, recipients


async def test_sends_confirmed_out_of_order_move_the_checkpoint_past_every_settled_one(
    runtime, tenant, clock
) -> None:
    sender, campaign = await _claimed(runtime, tenant, clock)
    seqs = sorted((await _stored(runtime, campaign.id))[1])
    at = clock.now() + timedelta(seconds=5)

    assert await sender.confirm(campaign, {seqs[1]: (R_SENT, "")}, at) is True
    row, recipients = await _stored(runtime, campaign.id)
    assert (row.checkpoint, campaign.checkpoint) == (seqs[0] - 1, seqs[0] - 1)
    assert recipients[seqs[1]] == (R_SENT, at)
    assert row.lease_until == at + timedelta(seconds=sender.lease_seconds)

    assert await sender.confirm(campaign, {seqs[0]: (R_SENT, "")}, at) is True
    assert (await _stored(runtime, campaign.id))[0].checkpoint == seqs[1]

    assert await sender.confirm(campaign, {seqs[2]: (R_SENT, "")}, at) is True
    row, recipients = await _stored(runtime, campaign.id)
    assert row.checkpoint == row.audience_size == 3
    assert {status for status, _ in recipients.values()} == {R_SENT}


async def test_a_sender_that_lost_the_lease_writes_none_of_its_sends(
    runtime, tenant, clock
) -> None:
    sender, campaign = await _claimed(runtime, tenant, clock)
    seqs = sorted((await _stored(runtime, campaign.id))[1])
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Campaign).where(Campaign.id == campaign.id).values(lease_owner="other")
        )

    confirmed = await sender.confirm(campaign, {s: (R_SENT, "") for s in seqs}, clock.now())

    assert confirmed is False
    row, recipients = await _stored(runtime, campaign.id)
    assert row.checkpoint == 0
    assert {status for status, _ in recipients.values()} == {R_PENDING}
