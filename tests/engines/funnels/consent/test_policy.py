"""FN-31, FN-32, FN-20, FN-20b: the consent policy as a pure function of the message, what is
known of the recipient and ``now``; and its reader, whose cost does not grow with the batch (one
query for the contacts and one for the erased addresses' hashes, whatever the batch's size)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import event

from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import (
    GONE,
    SEND,
    Outgoing,
    Person,
    Skip,
    WaitUntil,
    after_cap,
    counts_against_cap,
    decide,
)
from app.engines.funnels.contacts.erased_addresses import remember
from app.engines.funnels.models import Contact
from app.runtime import Runtime
from tests.engines.funnels.factories import Space, bulk_contacts

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
NEWS = Outgoing("email", topic="news")
RECEIPT = Outgoing("email", topic="news", transactional=True)


def code(message: Outgoing, person: Person | None, now: datetime = NOON) -> str:
    said = decide(message, person, now)
    return said.code if isinstance(said, Skip | WaitUntil) else "send"


@pytest.mark.parametrize(
    ("person", "marketing", "transactional"),
    [
        (Person(), "send", "send"),
        (GONE, "deleted", "deleted"),
        (None, "deleted", "deleted"),
        (Person(suppressed={"email": "unsubscribed"}), "unsubscribed", "send"),
        (Person(suppressed={"topic:news": "unsubscribed"}), "topic", "send"),
        (Person(suppressed={"topic:tips": "unsubscribed"}), "send", "send"),
        (Person(consent={"email": "withdrawn"}), "consent", "send"),
        (Person(consent={"sms": "withdrawn"}), "send", "send"),
        (Person(suppressed={"email": "bounced"}), "bounced", "bounced"),
        (Person(suppressed={"email": "complained"}), "complained", "complained"),
        (Person(remembered={"email": "bounced"}), "erased", "erased"),
        (Person(remembered={"topic:news": "unsubscribed"}), "erased", "send"),
        (Person(remembered={"email": "unsubscribed"}), "erased", "send"),
        (Person(remembered={"sms": "unsubscribed"}), "send", "send"),
    ],
)
def test_fn31_fn32_email_decisions(
    person: Person | None, marketing: str, transactional: str
) -> None:
    assert code(NEWS, person) == marketing
    assert code(RECEIPT, person) == transactional


def test_fn31_other_channels_follow_their_own_choices_not_email_ones() -> None:
    sms = Outgoing("sms")
    assert code(sms, Person(suppressed={"email": "unsubscribed", "topic:marketing": "x"})) == "send"
    assert code(sms, Person(suppressed={"email": "bounced"})) == "send"
    assert code(sms, Person(suppressed={"sms": "unsubscribed"})) == "unsubscribed"
    assert code(sms, Person(consent={"sms": "withdrawn"})) == "consent"
    assert code(sms, Person(remembered={"sms": "complained"})) == "erased"
    assert code(Outgoing("sms", transactional=True), Person(consent={"sms": "withdrawn"})) == "send"
    assert code(Outgoing("push", transactional=True), Person(suppressed={"push": "bounced"})) == (
        "bounced"
    )


def test_team_notifications_and_requests_are_exempt_but_not_for_a_deleted_contact() -> None:
    everything = Person(
        suppressed={"email": "complained", "sms": "bounced"}, consent={"email": "withdrawn"}
    )
    for message in (Outgoing("email", internal=True), Outgoing("team", internal=True)):
        assert decide(message, everything, NOON) is SEND
        assert counts_against_cap(message) is False
    for channel in ("http", "payment", "booking", "ai"):
        assert decide(Outgoing(channel), everything, NOON) is SEND
        assert code(Outgoing(channel), GONE) == "deleted"


def test_fn20_quiet_hours_in_the_recipients_zone() -> None:
    quiet = Outgoing("email", quiet_hours=(21, 8))
    berlin = Person(timezone="Europe/Berlin")
    at_night = datetime(2026, 3, 2, 21, 30, tzinfo=UTC)  # 22:30 in Berlin
    said = decide(quiet, berlin, at_night)
    assert said == WaitUntil(
        datetime(2026, 3, 3, 7, 0, tzinfo=UTC),
        "quiet hours: waits until 2026-03-03T07:00:00+00:00",
        "quiet",
    )
    assert decide(quiet, berlin, NOON) is SEND
    # A suppressed contact is skipped, not kept waiting for the morning.
    assert code(quiet, Person(suppressed={"email": "bounced"}), at_night) == "bounced"


def test_fn20b_the_cap_counts_marketing_messages_and_says_what_a_refusal_does() -> None:
    until = datetime(2026, 3, 3, tzinfo=UTC)
    assert counts_against_cap(NEWS)
    assert counts_against_cap(Outgoing("letter"))
    assert not counts_against_cap(RECEIPT)
    assert after_cap(NEWS, until) == WaitUntil(
        until, "frequency cap reached: waits until 2026-03-03T00:00:00+00:00", "frequency_cap"
    )
    assert after_cap(Outgoing("email", when_capped="skip"), until) == Skip(
        "frequency cap reached: skipped", "frequency_cap"
    )


@pytest.mark.parametrize("batch", [50, 256])
async def test_the_reader_costs_two_queries_whatever_the_batch(
    runtime: Runtime, space: Space, batch: int
) -> None:
    """The deliverer and the campaign sender read in batches of 50 to 256: the gate's reader
    asks the database twice per batch (contacts, erased hashes), never once per message."""
    ws = space.workspace_id
    ids = await bulk_contacts(runtime, ws, batch, prefix=f"b{batch}-")
    key = gate.address_key(runtime.secrets)
    async with runtime.db.write() as uow:
        # One erased address among them: its suppression reaches the new contact.
        gone = Contact(
            workspace_id=ws, email=f"b{batch}-7@x.test", suppressed={"email": "complained"}
        )
        await remember(uow.session, key, gone, runtime.clock.now())
    statements: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    engine = runtime.db.read_engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        async with runtime.db.read() as session:
            people = await gate.people(session, key, ids)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 2
    assert len(people) == batch
    assert code(NEWS, people[ids[7]]) == "erased"
    assert {code(NEWS, p) for i, p in people.items() if i != ids[7]} == {"send"}
