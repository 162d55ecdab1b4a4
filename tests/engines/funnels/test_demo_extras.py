"""The demo workspace also gets a hosted sign-up form feeding the welcome funnel (once published),
and a draft campaign to a segment of its contacts."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from app.demo.funnels import PART
from app.demo.parts import DemoWorkspace
from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.service import list_campaigns
from app.engines.funnels.definitions.service import list_funnels, publish
from app.engines.funnels.events.forms import list_forms
from app.engines.funnels.models import Contact
from tests.engines.funnels.factories import Engine, settle


async def test_demo_seeds_a_form_and_a_draft_campaign(client, engine: Engine, tenant) -> None:
    runtime = engine.runtime
    engine.clock.set(datetime(2026, 3, 2, 13, 0, tzinfo=UTC))  # daytime everywhere
    ws = tenant.workspace_id
    await PART.seed(
        runtime, DemoWorkspace(organisation_id=0, workspace_id=ws, admin_user_id=0, sandbox_urls={})
    )
    async with runtime.db.read() as s:
        [form] = await list_forms(s, ws)
        [campaign] = await list_campaigns(s, ws, after=None, limit=10)
    assert campaign.status == "draft"
    assert campaign.audience is not None

    # Once the welcome funnel is published, the form feeds it (it joins the Newsletter list).
    async with runtime.db.write() as uow:
        [funnel] = await list_funnels(uow.session, ws)
        await publish(uow.session, ws, funnel.id, user_id=None, now=runtime.clock.now())
    page = await client.get(f"/t/f/{form.public_id}")
    assert page.status_code == 200
    assert 'name="first_name"' in page.text
    await engine.drive()
    engine.sink.reset()
    sent = await client.post(
        f"/t/f/{form.public_id}",
        data={"email": "lin@example.com", "first_name": "Lin", "submission_id": "demo-1"},
    )
    assert sent.status_code == 200
    await settle(runtime)
    await engine.drive()
    assert [m.subject for m in engine.sink.messages] == ["Welcome, Lin!"]

    # The campaign's audience is a segment of the demo contacts: the two in London.
    async with runtime.db.write() as uow:
        size = await materialise(uow.session, campaign.id, runtime.clock.now())
    async with runtime.db.read() as s:
        row = await s.get(Campaign, campaign.id)
        london = set(
            await s.scalars(
                select(Contact.email).where(
                    Contact.workspace_id == ws, Contact.timezone == "Europe/London"
                )
            )
        )
    assert size == 2
    assert row is not None
    assert row.audience_size == 2
    assert london == {"ada@example.com", "alan@example.com"}
