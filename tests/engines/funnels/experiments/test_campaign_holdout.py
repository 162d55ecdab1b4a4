"""FN-57 for campaigns: a campaign's control share is snapshotted with the audience, counted,
never sent to; its holdout report shows the lift of the rest of the audience against it."""

from __future__ import annotations

from sqlalchemy import select

from app.engines.funnels.campaigns.models import Recipient
from app.engines.funnels.campaigns.work.sender import send_until_done
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.experiments.campaign_holdout import campaign_held_out
from tests.conftest import auth
from tests.engines.funnels.campaigns.test_campaigns import _campaign, _sender
from tests.engines.funnels.factories import bulk_contacts


async def test_fn57_campaign_holdout_gets_nothing_is_counted_and_shows_lift(
    client, runtime, tenant, other_tenant, sink, clock
) -> None:
    ws = tenant.workspace_id
    people = await bulk_contacts(runtime, ws, 30)
    c = await _campaign(
        client, tenant, holdout={"percent": 40, "goal_event": "purchase", "window_days": 7}
    )
    assert c["holdout"] == {"percent": 40, "goal_event": "purchase", "window_days": 7}
    taken = await client.post(f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant))
    assert taken.json()["audience_size"] == 30
    sender, pool = _sender(runtime, sink)
    try:
        assert await send_until_done(sender, c["id"], clock) is True
    finally:
        await pool.aclose()
    control = [p for p in people if campaign_held_out(c["id"], p, 40)]
    treated = [p for p in people if p not in control]
    assert control
    assert treated
    assert len(sink.snapshot()) == len(treated)
    async with runtime.db.read() as s:
        rows = {r.contact_id: r for r in await s.scalars(select(Recipient))}
    for person in control:
        assert (rows[person].status, rows[person].detail) == ("skipped", "holdout")
    shown = (await client.get(f"/api/v1/funnels/campaigns/{c['id']}", headers=auth(tenant))).json()
    assert shown["counters"]["sent"] == len(treated)
    assert shown["counters"]["skipped"] == len(control)

    async with runtime.db.write() as uow:
        for person in control[:1] + treated[:5]:
            await record_event(
                uow.session,
                workspace_id=ws,
                contact_id=person,
                name="purchase",
                source="api",
                now=clock.now(),
            )
    got = await client.get(f"/api/v1/funnels/campaigns/{c['id']}/holdout", headers=auth(tenant))
    assert got.status_code == 200, got.text
    report = got.json()
    assert (report["control"]["entered"], report["control"]["converted"]) == (len(control), 1)
    assert (report["treated"]["entered"], report["treated"]["converted"]) == (len(treated), 5)
    rc, rt = 1 / len(control), 5 / len(treated)
    assert abs(report["lift"] - (rt - rc) / rc) < 1e-9

    foreign = await client.get(
        f"/api/v1/funnels/campaigns/{c['id']}/holdout", headers=auth(other_tenant)
    )
    assert foreign.status_code == 404
    plain = await _campaign(client, tenant)
    none = await client.get(
        f"/api/v1/funnels/campaigns/{plain['id']}/holdout", headers=auth(tenant)
    )
    assert none.status_code == 404
    assert none.json()["code"] == "no_holdout"
    bad = await client.post(
        "/api/v1/funnels/campaigns",
        json={
            "name": "x",
            "subject": "s",
            "body": "b",
            "holdout": {"percent": 80, "goal_event": "p"},
        },
        headers=auth(tenant),
    )
    assert bad.status_code in (400, 422)
    assert "percent" in bad.text
