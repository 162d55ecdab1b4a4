"""The consent gate's reading side: what :mod:`.policy` needs, loaded for a whole batch at once.

Senders never read a contact's ``suppressed`` or ``consent`` nor the erased addresses' hashes
themselves (a test keeps it so): they ask :func:`people` for the batch's recipients (one query for
the contacts, one for the hashes of their addresses, whatever the batch's size), describe each
message with :func:`message_of` (an outbox effect) or an :class:`~.policy.Outgoing` of their own
(a campaign), and let :func:`~.policy.decide` answer. The frequency cap's slots are taken by
:func:`take_slots`, after the other rules let a message through, in the sender's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.consent.policy import (
    GONE,
    SKIP,
    WAIT,
    Outgoing,
    Person,
    Skip,
    WaitUntil,
    after_cap,
    counts_against_cap,
)
from app.engines.funnels.contacts import erased_addresses
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.payloads import EffectPayload, Email, Http, Message, Team
from app.engines.funnels.outbox.work import frequency
from app.platform.crypto import SecretBox


def address_key(secrets: SecretBox) -> bytes:
    """The instance key the erased addresses' hashes are made with (FN-32)."""
    return secrets.derive(erased_addresses.PURPOSE)


def message_of(channel: str, payload: EffectPayload) -> Outgoing:
    """How the policy sees an outbox effect."""
    if isinstance(payload, Team):
        return Outgoing(channel, internal=True)
    if isinstance(payload, Http) and payload.to_contact is not None:
        # A request that messages the contact through another system: the choices of the
        # channel it messages them on apply, as to a message sent on it.
        return Outgoing(
            payload.to_contact,
            topic=payload.topic,
            transactional=payload.transactional,
            quiet_hours=payload.quiet_hours,
        )
    if not isinstance(payload, Message):
        return Outgoing(channel)
    hours = payload.quiet_hours
    return Outgoing(
        channel,
        topic=payload.topic if isinstance(payload, Email) else None,
        transactional=payload.transactional,
        internal=isinstance(payload, Email) and payload.internal,
        quiet_hours=(hours[0], hours[1]) if hours else None,
        when_capped=SKIP if payload.when_capped == SKIP else WAIT,
    )


@dataclass(frozen=True, slots=True)
class _Address:
    id: int
    workspace_id: int
    email: str | None
    phone: str | None


async def people(
    session: ReadSession, address_key: bytes | None, contact_ids: Iterable[int]
) -> dict[int, Person]:
    """The recipients as they are now, by contact id (a missing or deleted contact: ``GONE``)."""
    ids = set(contact_ids)
    if not ids:
        return {}
    rows = (
        await session.execute(
            select(
                Contact.id,
                Contact.workspace_id,
                Contact.email,
                Contact.phone,
                Contact.timezone,
                Contact.suppressed,
                Contact.consent,
                Contact.deleted_at,
            ).where(Contact.id.in_(ids))
        )
    ).all()
    live = [r for r in rows if r.deleted_at is None]
    remembered = (
        {}
        if address_key is None
        else await erased_addresses.recall(
            session, address_key, [_Address(r.id, r.workspace_id, r.email, r.phone) for r in live]
        )
    )
    found = {cid: GONE for cid in ids}
    for r in live:
        found[r.id] = Person(
            timezone=r.timezone or "UTC",
            suppressed=dict(r.suppressed or {}),
            consent=dict(r.consent or {}),
            remembered=remembered.get(r.id, {}),
        )
    return found


async def person_at(
    session: ReadSession, address_key: bytes | None, workspace_id: int, email: str
) -> Person:
    """Whoever the workspace knows at an e-mail address (a test send's target): every live
    contact with it, and what an erased one left under its hash."""
    rows = (
        await session.execute(
            scoped_select(Contact, workspace_id, Contact.suppressed, Contact.consent).where(
                func.lower(Contact.email) == email.strip().lower(), Contact.deleted_at.is_(None)
            )
        )
    ).all()
    suppressed: dict[str, str] = {}
    consent: dict[str, str] = {}
    for row in rows:
        suppressed.update(row.suppressed or {})
        consent.update(row.consent or {})
    remembered = (
        {}
        if address_key is None
        else await erased_addresses.recall(
            session, address_key, [_Address(0, workspace_id, email, None)]
        )
    )
    return Person(suppressed=suppressed, consent=consent, remembered=remembered.get(0, {}))


@dataclass(frozen=True, slots=True)
class Ask:
    """A message the policy let through, asking for a frequency-cap slot."""

    ref: Any
    """The sender's handle (an effect id, a recipient's seq)."""
    workspace_id: int
    contact_id: int
    message: Outgoing
    person: Person


async def take_slots(
    session: WriteSession,
    caps: dict[int, frequency.Cap],
    asks: Iterable[Ask],
    now: datetime,
) -> tuple[dict[Any, Skip | WaitUntil], dict[Any, frequency.Want]]:
    """Reserve the cap's slots of the messages about to go (rule 7): the refused ones' decisions
    and the reserved slots (given back with :func:`~app.engines.funnels.outbox.work.frequency.release`
    when the message did not go out), each by ``ref``. Transactional and exempt messages take
    none."""
    wants: dict[Any, frequency.Want] = {}
    messages: dict[Any, Outgoing] = {}
    for ask in asks:
        if ask.workspace_id in caps and counts_against_cap(ask.message):
            wants[ask.ref] = frequency.Want(
                ask.ref, ask.workspace_id, ask.contact_id, ask.person.timezone
            )
            messages[ask.ref] = ask.message
    if not wants:
        return {}, {}
    capped = await frequency.reserve(session, caps, list(wants.values()), now)
    refused = {ref: after_cap(messages[ref], until) for ref, until in capped.items()}
    return refused, {ref: w for ref, w in wants.items() if ref not in capped}
