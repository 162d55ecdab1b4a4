"""Applying stored events set-based (apply_set.py): the same outcomes, contacts and contact
events as applying each event in its own savepoint, in a few statements per batch."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, insert, select, update

from app.engines.funnels.contacts.store import ContactData, contact_row, create_contacts
from app.engines.funnels.events.forms import create_form
from app.engines.funnels.events.ingest import process_batch, store
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.models import Contact, ContactEvent
from app.runtime import Runtime
from tests.engines.funnels.factories import contact, count

Stored = tuple[str, str, str, dict[str, Any]]
"""The sender's id, the source, the name and the payload of an inbound event."""


def api(key: str, who: dict[str, Any], *, create: bool = False) -> Stored:
    return key, "api", "order_placed", {"contact": who, "create": create, "properties": {"k": key}}


async def store_all(runtime: Runtime, ws: int, events: list[Stored]) -> None:
    async with runtime.db.write() as uow:
        for external_id, source, name, payload in events:
            await store(
                uow.session,
                workspace_id=ws,
                source=source,
                name=name,
                external_id=external_id,
                payload=payload,
                now=runtime.clock.now(),
            )


async def outcomes(runtime: Runtime, ws: int) -> dict[str, str | None]:
    async with runtime.db.read() as s:
        rows = await s.execute(
            select(InboundEvent.external_id, InboundEvent.outcome)
            .where(InboundEvent.workspace_id == ws)
            .order_by(InboundEvent.id)
        )
        return {str(k): v for k, v in rows}


async def recorded(runtime: Runtime, ws: int) -> list[tuple[str, str | None, str, str]]:
    """The workspace's contact events in id order: name, the contact's e-mail (ids differ from
    one workspace to the other), source, and the sender's id carried in the properties."""
    async with runtime.db.read() as s:
        rows = await s.execute(
            select(ContactEvent.name, Contact.email, ContactEvent.source, ContactEvent.properties)
            .join(Contact, Contact.id == ContactEvent.contact_id)
            .where(ContactEvent.workspace_id == ws)
            .order_by(ContactEvent.id)
        )
        return [
            (name, email, source, str(props.get("k", ""))) for name, email, source, props in rows
        ]


async def contacts_of(runtime: Runtime, ws: int) -> list[tuple[str | None, str, bool]]:
    async with runtime.db.read() as s:
        rows = await s.execute(
            select(Contact.email, Contact.first_name, Contact.deleted_at.is_not(None))
            .where(Contact.workspace_id == ws)
            .order_by(Contact.email, Contact.id)
        )
        return [(email, first, bool(deleted)) for email, first, deleted in rows]


async def mixed_batch(runtime: Runtime, ws: int, other_ws: int) -> list[Stored]:
    """Every case of the set-based path, and a form in the middle (applied alone)."""
    now = runtime.clock.now()
    ann = await contact(runtime, ws, "ann@example.com")
    bob = await contact(runtime, ws, "bob@example.com")
    gone = await contact(runtime, ws, "gone@example.com")
    elsewhere = await contact(runtime, other_ws, f"elsewhere{ws}@example.com")
    async with runtime.db.write() as uow:
        # Deleted, its address kept: neither its id nor its address finds it any more.
        await uow.session.execute(update(Contact).where(Contact.id == gone).values(deleted_at=now))
        form = await create_form(uow.session, ws, name="Join", fields=[], now=now)
    return [
        api("by-email", {"email": "  ANN@example.com "}),
        api("by-id", {"id": bob}),
        ("site-visit", "site", "page_visit", {"contact_id": ann, "url": "/a", "title": "A"}),
        api("new", {"email": "new@example.com", "first_name": " Nina "}, create=True),
        api("new-again", {"email": "NEW@example.com", "first_name": "Other"}, create=True),
        api("new-found", {"email": "new@example.com"}),
        api("late-before", {"email": "late@example.com"}),
        api("late", {"email": "late@example.com"}, create=True),
        api("unknown-id", {"id": 987_654_321}),
        api("other-workspace", {"id": elsewhere}),
        api("deleted-id", {"id": gone}),
        api("deleted-email", {"email": "gone@example.com"}),
        api("deleted-email-create", {"email": "gone@example.com"}, create=True),
        api("no-contact", {}),
        api("bad-phone", {"email": "phone@example.com", "phone": "1" * 41}, create=True),
        api("form-before", {"email": "form@example.com"}),
        ("form", "form", "submit", {"form": form.public_id, "values": {"email": "form@example.com", "first_name": "Fay"}}),
        api("form-after", {"email": "form@example.com"}),
        ("booking", "booking", "booking.created", {"booking": {"id": "b1", "attendee": {"email": "guest@example.com", "first_name": "Gus"}}}),
        ("payment", "payment", "charge.succeeded", {"data": {"object": {"id": "p1", "amount": 500, "receipt_email": "Bob@Example.com"}}}),
        ("pixel-bad", "tracking", "message_opened", {"ref": {"w": other_ws, "k": ann}}),
        ("pixel", "tracking", "link_clicked", {"ref": {"w": ws, "k": ann}, "url": "https://x.test"}),
        ("nowhere", "carrier-pigeon", "coo", {}),
    ]  # fmt: skip


EXPECTED = {
    "by-email": "recorded",
    "by-id": "recorded",
    "site-visit": "recorded",
    "new": "recorded",
    "new-again": "recorded",
    "new-found": "recorded",
    "late-before": "dropped: no contact with e-mail late@example.com",
    "late": "recorded",
    "unknown-id": "dropped: no contact 987654321",
    "deleted-id": "dropped: no contact {gone}",
    "deleted-email": "dropped: no contact with e-mail gone@example.com",
    "deleted-email-create": "recorded",
    "no-contact": "dropped: the event names no contact (contact.id or contact.email)",
    "form-before": "dropped: no contact with e-mail form@example.com",
    "form": "recorded",
    "form-after": "recorded",
    "booking": "recorded",
    "payment": "recorded",
    "pixel-bad": "dropped: malformed tracking reference",
    "pixel": "recorded",
    "nowhere": "dropped: unknown source carrier-pigeon",
}


async def test_a_mixed_batch_is_applied_as_one_event_at_a_time_would_be(
    runtime: Runtime, tenant: Any, other_tenant: Any
) -> None:
    """One batch: contacts by id and by e-mail (normalised), contacts created (one for an
    address given twice, none for an event before the one that creates it), unknown, foreign
    and deleted contacts dropped with the others recorded, a form applied alone in between. The
    same events applied one by one in another workspace give the same outcomes, contacts and
    contact events, in the same order."""
    ws, other = tenant.workspace_id, other_tenant.workspace_id
    await store_all(runtime, other, await mixed_batch(runtime, other, ws))
    await process_batch(runtime.db, now=runtime.clock.now(), limit=100, one_by_one=True)
    events = await mixed_batch(runtime, ws, other)
    await store_all(runtime, ws, events)
    result = await process_batch(runtime.db, now=runtime.clock.now(), limit=100)

    got = await outcomes(runtime, ws)
    gone = await _id_of(runtime, ws, "gone@example.com")
    for key, expected in EXPECTED.items():
        assert got[key] == expected.format(gone=gone), key
    assert got["other-workspace"] == "dropped: no contact " + str(
        await _id_of(runtime, other, f"elsewhere{ws}@example.com")
    )
    assert str(got["bad-phone"]).startswith("dropped: ")
    assert result.processed == len(events)
    assert result.dropped == sum(1 for o in got.values() if o and o.startswith("dropped"))
    theirs_outcomes = await outcomes(runtime, other)
    assert {k: _no_ids(v) for k, v in theirs_outcomes.items()} == {
        k: _no_ids(v) for k, v in got.items()
    }

    people = [p for p in await contacts_of(runtime, ws) if "elsewhere" not in str(p[0])]
    assert [p for p in people if p[0] == "new@example.com"] == [("new@example.com", "Nina", False)]
    assert [p for p in people if p[0] == "gone@example.com"] == [
        ("gone@example.com", "", True),
        ("gone@example.com", "", False),
    ]
    assert not any(p[0] == "phone@example.com" for p in people)
    mine = [e for e in await recorded(runtime, ws) if "elsewhere" not in str(e[1])]
    created = sorted(str(e[1]) for e in mine if e[0] == "contact_created")
    assert created == [
        *["ann@example.com", "bob@example.com", "form@example.com", "gone@example.com"],
        *["gone@example.com", "guest@example.com", "late@example.com", "new@example.com"],
    ]
    assert [e for e in mine if e[3] == "new-found"] == [
        ("order_placed", "new@example.com", "api", "new-found")
    ]

    # The same as each event in its own savepoint: contacts, and each contact's events in order.
    theirs = [e for e in await recorded(runtime, other) if "elsewhere" not in str(e[1])]
    assert people == [p for p in await contacts_of(runtime, other) if "elsewhere" not in str(p[0])]
    for email in {e[1] for e in mine}:
        assert [e for e in mine if e[1] == email] == [e for e in theirs if e[1] == email], email
    assert sorted(e for e in mine if e[0] != "contact_created") == sorted(
        e for e in theirs if e[0] != "contact_created"
    )


def _no_ids(outcome: str | None) -> str | None:
    return None if outcome is None else re.sub(r"\d+", "N", outcome)


async def _id_of(runtime: Runtime, ws: int, email: str) -> int:
    async with runtime.db.read() as s:
        found = await s.scalar(
            select(Contact.id)
            .where(Contact.workspace_id == ws, Contact.email == email)
            .order_by(Contact.id)
            .limit(1)
        )
    assert found is not None
    return int(found)


async def test_a_reprocessed_batch_records_nothing_twice(runtime: Runtime, tenant: Any) -> None:
    """A row applied again (its lease lost after the commit) records its contact event once and
    finds the contact it created the first time."""
    ws = tenant.workspace_id
    await contact(runtime, ws, "ann@example.com")
    events = [api(f"r{i}", {"email": "ann@example.com"}) for i in range(5)]
    events += [api("r-new", {"email": "fresh@example.com"}, create=True)]
    await store_all(runtime, ws, events)
    await process_batch(runtime.db, now=runtime.clock.now(), limit=100)
    async with runtime.db.write() as uow:
        await uow.session.execute(update(InboundEvent).values(processed_at=None, outcome=None))
    again = await process_batch(runtime.db, now=runtime.clock.now(), limit=100)
    assert again.processed == 6
    assert again.recorded == 6
    assert set((await outcomes(runtime, ws)).values()) == {"recorded"}
    assert await count(runtime, ContactEvent, ContactEvent.name == "order_placed") == 6
    assert await count(runtime, Contact, Contact.email == "fresh@example.com") == 1
    assert await count(runtime, ContactEvent, ContactEvent.name == "contact_created") == 2


async def test_a_contact_created_concurrently_is_found_instead(
    runtime: Runtime, tenant: Any
) -> None:
    """The address was free when the batch looked it up and taken when it inserted (the contact
    created in between, here just before the batch's insert reaches the database): the insert
    skips it and the events are recorded for the contact that exists, with no second
    ``contact_created``."""
    ws = tenant.workspace_id
    target = runtime.db.write_engine.sync_engine
    row = contact_row(ws, ContactData(email="race@example.com"), {}, runtime.clock.now())
    lookups: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("SELECT") and "FROM contacts" in statement and "email" in statement:
            lookups.append(statement)
        elif statement.startswith("INSERT INTO contacts") and not lookups[1:]:
            lookups.append("the contact created")
            conn.execute(insert(Contact).values(row))

    event.listen(target, "before_cursor_execute", before)
    try:
        await store_all(runtime, ws, [api("race", {"email": "race@example.com"}, create=True)])
        result = await process_batch(runtime.db, now=runtime.clock.now(), limit=100)
    finally:
        event.remove(target, "before_cursor_execute", before)
    existing = await _id_of(runtime, ws, "race@example.com")
    assert lookups[1:] == ["the contact created", lookups[2]]  # looked up again after the insert
    assert result.contacts == {ws: {existing}}
    assert (await outcomes(runtime, ws))["race"] == "recorded"
    assert await count(runtime, Contact, Contact.email == "race@example.com") == 1
    assert await count(runtime, ContactEvent, ContactEvent.name == "contact_created") == 0


async def test_create_contacts_skips_an_address_taken(runtime: Runtime, tenant: Any) -> None:
    ws = tenant.workspace_id
    await contact(runtime, ws, "taken@example.com")
    now = runtime.clock.now()
    taken, free = (
        contact_row(ws, ContactData(email=email), {}, now)
        for email in ("taken@example.com", "free@example.com")
    )
    async with runtime.db.write() as uow:
        created = await create_contacts(
            uow.session,
            [taken, free],
            now,
        )
    assert list(created) == [(ws, "free@example.com")]


@contextmanager
def statements(runtime: Runtime) -> Iterator[list[str]]:
    seen: list[str] = []
    target = runtime.db.write_engine.sync_engine

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement.split(None, 1)[0].upper())

    event.listen(target, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(target, "before_cursor_execute", before)


async def test_a_batch_takes_the_same_statements_whatever_its_size(
    runtime: Runtime, tenant: Any
) -> None:
    """Lookups, creation and recording are set-based: a batch of 10 and one of 40 events of each
    kind (existing contacts by id and by e-mail, new ones) run the same statements, and no
    savepoint."""
    ws = tenant.workspace_id
    counts = []
    for size in (10, 40):
        ids = [await contact(runtime, ws, f"c{size}.{i}@example.com") for i in range(size)]
        events: list[Stored] = []
        for i in range(size):
            events += [api(f"id{size}.{i}", {"id": ids[i]})]
            events += [api(f"e{size}.{i}", {"email": f"c{size}.{i}@example.com"})]
            events += [api(f"n{size}.{i}", {"email": f"n{size}.{i}@example.com"}, create=True)]
        await store_all(runtime, ws, events)
        with statements(runtime) as seen:
            result = await process_batch(runtime.db, now=runtime.clock.now(), limit=3 * size)
        assert result.recorded == 3 * size
        assert "SAVEPOINT" not in seen
        counts.append(len(seen))
    assert counts[0] == counts[1]


async def test_batches_applied_at_once_create_each_contact_once(
    runtime: Runtime, tenant: Any
) -> None:
    """Four batches at once (side by side on PostgreSQL, in turn on SQLite), each creating the
    same three contacts: each contact is created once and every event is recorded for it."""
    ws = tenant.workspace_id
    events = [
        api(f"at-once{i}", {"email": f"p{i % 3}@example.com"}, create=True) for i in range(12)
    ]
    await store_all(runtime, ws, events)
    results = await asyncio.gather(
        *(process_batch(runtime.db, now=runtime.clock.now(), limit=3) for _ in range(4))
    )
    assert sum(r.recorded for r in results) == 12
    assert set((await outcomes(runtime, ws)).values()) == {"recorded"}
    assert await count(runtime, Contact, Contact.workspace_id == ws) == 3
    assert await count(runtime, ContactEvent, ContactEvent.name == "contact_created") == 3
    assert await count(runtime, ContactEvent, ContactEvent.name == "order_placed") == 12
