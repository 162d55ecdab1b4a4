"""Deletion that deletes (spec §9, hard case 5): a contact seeded through every path that stores
data (API, events, a form, a funnel that mails them and sets a field, a delivery report, a
one-click unsubscribe, a campaign), then deleted; every column of every table is scanned for their
e-mail, names, phone and property values: none found. Runs on SQLite and on PostgreSQL (the
suite's database). Before deletion, the export holds it all."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.db.base import Base
from app.engines.funnels.campaigns.send import send_until_done
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import ErasedAddress
from tests.conftest import auth
from tests.engines.funnels.campaigns.test_campaigns import _campaign, _sender
from tests.engines.funnels.factories import Engine, graph, node, published, settle, setup_names

EMAIL = "zelda.quux@example.com"
NEEDLES = ("zelda", "quux", "555 0199", "plumbus")
"""The address, the names, the phone and the values of properties and fields (lower case)."""


async def _scan(runtime) -> list[str]:
    found: list[str] = []
    async with runtime.db.read() as s:
        for table in Base.metadata.sorted_tables:
            for row in (await s.execute(select(table))).mappings():
                for column, value in row.items():
                    text = str(value).lower()
                    for needle in NEEDLES:
                        if needle in text:
                            found.append(f"{table.name}.{column} holds {needle!r}")
    return found


async def test_deleting_a_contact_erases_them_from_every_column_of_every_table(
    client, runtime, tenant, engine: Engine, sink
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"], lists=["news"], fields={"code": "text"})
    created = await client.post(
        "/api/v1/funnels/contacts",
        json={
            "email": EMAIL,
            "first_name": "Zelda",
            "last_name": "Quux",
            "phone": "+1 555 0199",
            "fields": {"code": "plumbus-42"},
            "tags": ["vip"],
            "lists": ["news"],
        },
        headers=auth(tenant),
    )
    assert created.status_code == 201, created.text
    zelda = created.json()["id"]
    await published(
        runtime,
        ws,
        graph(
            node(
                "send_email",
                "hello",
                subject="Hi {{first_name}} {{last_name}}",
                body="Your code {{code}}: https://shop.example/?who={{email}}",
                next="set",
            ),
            node("set_field", "set", field="code", value="grumbo-7", next="w"),
            node("wait", "w", days=3),
            triggers=[{"kind": "api_event", "event": "signup"}],
        ),
    )
    event = await client.post(
        "/hooks/funnels/events",
        json={
            "event_id": "zq-1",
            "name": "signup",
            "contact": {"email": EMAIL},
            "properties": {"note": "Zelda from Quux, plumbus fan", "phone": "555 0199"},
        },
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert event.status_code == 202
    form = await client.post(
        "/api/v1/funnels/forms",
        json={"name": "Signup", "fields": [{"key": "first_name", "label": "Name"}]},
        headers=auth(tenant),
    )
    submitted = await client.post(
        f"/t/f/{form.json()['public_id']}",
        data={"email": EMAIL, "first_name": "Zelda", "submission_id": "f-1"},
    )
    assert submitted.status_code == 200
    await settle(runtime)
    await engine.drive()
    [mail] = [m for m in sink.messages if m.to == [EMAIL]]
    report = await client.post(
        "/hooks/funnels/delivery",
        json={
            "event_id": "d-1",
            "kind": "delivered",
            "message_id": mail.message_id,
            "email": EMAIL,
        },
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert report.status_code == 202
    # RFC 8058 one-click unsubscribe from the funnel mail (the contact's choice is stored).
    [one_click] = re.findall(r"<(https?://[^>]+)>", mail.headers["List-Unsubscribe"])
    left = await client.post(
        one_click.removeprefix(runtime.settings.web.public_url),
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert left.status_code == 200
    campaign = await _campaign(client, tenant)
    await client.post(f"/api/v1/funnels/campaigns/{campaign['id']}/audience", headers=auth(tenant))
    sender, pool = _sender(runtime, sink, signing=Tracking("http://x.test", "s"))
    try:
        assert await send_until_done(sender, campaign["id"], runtime.clock)
    finally:
        await pool.aclose()
    await settle(runtime)
    await engine.drive()
    assert await _scan(runtime), "the seeding stored nothing to erase"

    # The export answers an access request with all of it.
    exported = await client.get(f"/api/v1/funnels/contacts/{zelda}/export", headers=auth(tenant))
    assert exported.status_code == 200, exported.text
    body = exported.json()
    assert body["contact"]["email"] == EMAIL
    assert body["tags"] == ["vip"]
    assert body["lists"] == ["news"]
    assert {e["name"] for e in body["events"]} >= {"signup", "form_submit", "email_delivered"}
    assert [m["payload"]["to"] for m in body["messages"]] == [[EMAIL]]
    assert {s["node_id"] for s in body["steps"]} >= {"hello", "set", "w"}
    assert [c["campaign_name"] for c in body["campaigns"]] == ["March news"]
    [set_step] = [s for s in body["steps"] if s["node_id"] == "set"]
    assert set_step["output"]["before"] == "plumbus-42"

    gone = await client.delete(f"/api/v1/funnels/contacts/{zelda}", headers=auth(tenant))
    assert gone.status_code == 204
    assert await _scan(runtime) == []
    # What suppression keeps is a keyed hash of the address, which the scan cannot find.
    async with runtime.db.read() as s:
        kept = [(r.kind, r.suppressed) for r in await s.scalars(select(ErasedAddress))]
    assert kept == [("email", {"topic:marketing": "unsubscribed"})]
