"""Deletion that deletes (FN-33, hard case 5; FN-32): a contact seeded through every path that
stores data (see ``every_path``), exported, then deleted. Every column of every table of the live
schema (reflected, not the models) is scanned for their e-mail, phone, names and a distinctive
property value — stored idempotency answers opened with the instance key — and nothing is found:
what suppression keeps is FN-32's keyed hash. The rows and their counts stay. The export, taken
before, listed everything, the rows never linked to the contact included (the event sent before
they were a contact, the SES and Mailgun reports about a message we never sent). Runs on SQLite
and on PostgreSQL (the suite's database)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, func, select

from app.engines.funnels.contacts.erased_addresses import EMAIL as EMAIL_KIND
from app.engines.funnels.contacts.erased_addresses import PURPOSE, digest
from app.engines.funnels.models import ErasedAddress
from app.platform.crypto import SecretBoxError
from tests.conftest import auth
from tests.engines.funnels.contacts.every_path import EMAIL, NEEDLES, seed_every_path
from tests.engines.funnels.events.test_mail_reports import sns  # noqa: F401
from tests.engines.funnels.factories import Engine

KEPT = (
    "funnel_inbound_events",
    "contact_events",
    "funnel_runs",
    "funnel_steps",
    "funnel_outbox",
    "delivery_events",
    "campaign_recipients",
    "campaign_events",
    "idempotency_keys",
)
"""Tables whose rows stay, emptied (their counts do not change with the deletion)."""


def _readable(runtime, table: str, column: str, value: Any) -> str:
    if isinstance(value, bytes | memoryview):
        raw = bytes(value)
        if (table, column) == ("idempotency_keys", "response_body"):
            try:
                return runtime.secrets.decrypt(raw).lower()
            except SecretBoxError:
                pass
        return raw.decode("utf-8", "replace").lower()
    return str(value).lower()


async def _live(runtime) -> MetaData:
    meta = MetaData()
    async with runtime.db.read() as s:
        conn = await s.connection()
        await conn.run_sync(lambda sync: meta.reflect(bind=sync))
    return meta


async def _scan(runtime) -> list[str]:
    """Every column of every table of the live schema, searched for the person."""
    found: list[str] = []
    meta = await _live(runtime)
    async with runtime.db.read() as s:
        for table in meta.sorted_tables:
            for row in (await s.execute(select(table))).mappings():
                for column, value in row.items():
                    text = _readable(runtime, table.name, column, value)
                    found += [
                        f"{table.name}.{column} holds {needle!r}"
                        for needle in NEEDLES
                        if needle in text
                    ]
    return found


async def _counts(runtime) -> dict[str, int]:
    meta = await _live(runtime)
    async with runtime.db.read() as s:
        return {
            name: int(await s.scalar(select(func.count()).select_from(meta.tables[name])) or 0)
            for name in KEPT
        }


def _unlinked(body: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (e["source"], e["name"]) for e in body["inbound_events"] if e["contact_id"] is None
    )


async def test_fn33_deleting_a_contact_erases_them_from_every_column_of_every_table(
    client,
    runtime,
    tenant,
    engine: Engine,
    sink,
    sns,  # noqa: F811
) -> None:
    seeded = await seed_every_path(client, runtime, tenant, engine, sink, sns)
    stored = await _scan(runtime)
    for where in (
        "contacts.email",
        "funnel_inbound_events.payload",
        "contact_events.properties",
        "funnel_outbox.payload",
        "funnel_steps.output",
        "idempotency_keys.response_body",
    ):
        assert any(f.startswith(where) for f in stored), f"the seeding stored nothing in {where}"

    # The export answers an access request with all of it, the unlinked rows included.
    exported = await client.get(
        f"/api/v1/funnels/contacts/{seeded.contact_id}/export", headers=auth(tenant)
    )
    assert exported.status_code == 200, exported.text
    body = exported.json()
    assert body["contact"]["email"] == EMAIL
    assert [t["tag"] for t in body["tags"]] == ["vip"]
    assert [m["list"] for m in body["lists"]] == ["news"]
    assert {e["name"] for e in body["events"]} >= {
        "signup",
        "form_submit",
        "page_visit",
        "email_delivered",
        "payment_made",
        "booking_made",
    }
    # SES, SendGrid and Postmark report a delivery, Mailgun an open, all before the contact.
    assert _unlinked(body) == [
        ("api", "browsed"),
        ("delivery", "delivered"),
        ("delivery", "delivered"),
        ("delivery", "delivered"),
        ("delivery", "opened"),
    ]
    [answer] = body["idempotency_answers"]
    assert answer["response_body"]["email"] == EMAIL
    assert [m["payload"]["to"] for m in body["messages"]] == [[EMAIL]]
    assert {s["node_id"] for s in body["steps"]} >= {"hello", "set", "w"}
    [set_step] = [s for s in body["steps"] if s["node_id"] == "set"]
    assert set_step["output"]["before"] == "plumbus-43"  # as the import left it
    assert [c["campaign_name"] for c in body["campaigns"]] == ["March news"]
    assert body["campaign_events"]
    before = await _counts(runtime)

    gone = await client.delete(
        f"/api/v1/funnels/contacts/{seeded.contact_id}", headers=auth(tenant)
    )
    assert gone.status_code == 204
    assert await _scan(runtime) == []
    assert await _counts(runtime) == before
    # FN-32: what suppression keeps is the keyed hash of the address, never the address.
    async with runtime.db.read() as s:
        kept = [(r.kind, r.digest, r.suppressed) for r in await s.scalars(select(ErasedAddress))]
    key = runtime.secrets.derive(PURPOSE)
    assert kept == [
        (EMAIL_KIND, digest(key, EMAIL_KIND, EMAIL), {"topic:marketing": "unsubscribed"})
    ]
