"""What a stored inbound event means, worked out without the database: whom it is about, which
contact event it records, and for a tracking pixel or link the reports it adds (pure).

Both ways of applying stored events start here: one event at a time in its own savepoint
(ingest.py), and a run of events set-based (apply_set.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.engines.funnels.contacts.events import event_row
from app.engines.funnels.contacts.store import ContactData
from app.engines.funnels.events.tracking import MessageRef


class Dropped(Exception):
    """The event cannot be applied (unknown contact, unknown form, …); kept with the reason."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """A leased row of ``funnel_inbound_events``."""

    id: int
    workspace_id: int
    source: str
    name: str
    external_id: str | None
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Plan:
    """What an event of a simple source does: find (or create) the contact ``who`` names and
    record one contact event; a tracked open or click also reports on its message."""

    who: Mapping[str, Any]
    """``id``, or ``email`` (with ``first_name``, ``last_name`` and ``phone`` for a new one)."""
    create: bool
    name: str
    properties: dict[str, Any]
    tracked: MessageRef | None = None
    """A tracking event's message, reported on once its contact is found."""


def contact_key(who: Mapping[str, Any]) -> int | str:
    """The contact id ``who`` gives, else the e-mail address as given."""
    contact_id = who.get("id")
    if isinstance(contact_id, int):
        return contact_id
    email = who.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise Dropped("the event names no contact (contact.id or contact.email)")
    return email


def new_contact(email: str, who: Mapping[str, Any]) -> ContactData:
    """The contact an event creates for an unknown e-mail address."""
    return ContactData(
        email=email,
        first_name=text(who.get("first_name")),
        last_name=text(who.get("last_name")),
        phone=text(who.get("phone")),
    )


def text(value: Any) -> str | None:
    return value.strip()[:200] if isinstance(value, str) and value.strip() else None


def occurred_at(payload: Mapping[str, Any], now: datetime) -> datetime:
    raw = payload.get("occurred_at")
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            return now
        if parsed.tzinfo is not None:
            return min(parsed, now)
    return now


def contact_event(
    event: Inbound, contact_id: int, name: str, properties: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """The contact event a stored event records (a row for ``record_events``)."""
    return event_row(
        workspace_id=event.workspace_id,
        contact_id=contact_id,
        name=name,
        source=event.source,
        now=now,
        occurred_at=occurred_at(event.payload, now),
        # Unique per inbound row, which is itself unique per sender id: a reprocessed row
        # cannot record its contact event twice.
        external_id=f"in:{event.id}",
        properties=dict(properties),
    )


def _api(event: Inbound) -> Plan:
    p = event.payload
    properties = dict(p.get("properties") or {})
    return Plan(p.get("contact") or {}, bool(p.get("create")), event.name, properties)


def _site(event: Inbound) -> Plan:
    p = event.payload
    props = {"url": str(p.get("url", ""))[:2000], "title": str(p.get("title", ""))[:300]}
    return Plan({"id": p.get("contact_id")}, False, "page_visit", props)


def _tracking(event: Inbound) -> Plan:
    p = event.payload
    ref = MessageRef.from_claims(p.get("ref") or {})
    if ref is None or ref.workspace_id != event.workspace_id:
        raise Dropped("malformed tracking reference")
    props: dict[str, Any] = {"campaign_id": ref.campaign_id, "effect": ref.effect}
    if event.name != "message_opened":
        props["url"] = str(p.get("url", ""))[:2000]
    return Plan({"id": ref.contact_id}, False, event.name, props, tracked=ref)


def _booking(event: Inbound) -> Plan:
    booking = event.payload.get("booking") or {}
    props = {
        "booking_id": booking.get("id"),
        "resource": booking.get("resource_id"),
        "start": booking.get("start"),
    }
    return Plan(booking.get("attendee") or {}, True, "booking_made", props)


def _payment(event: Inbound) -> Plan:
    """A Stripe payment event: a PaymentIntent or Charge (``amount_received``/``amount``,
    ``receipt_email``), or a completed Checkout Session (``amount_total``; the payer's address in
    ``customer_details.email``, or ``customer_email`` when the session was created with one).
    An address in ``metadata.email`` comes first."""
    obj = (event.payload.get("data") or {}).get("object") or {}
    metadata = obj.get("metadata") or {}
    details = obj.get("customer_details")
    email = (
        metadata.get("email")
        or obj.get("receipt_email")
        or (details.get("email") if isinstance(details, dict) else None)
        or obj.get("customer_email")
    )
    amount = next(
        (obj[k] for k in ("amount_received", "amount_total", "amount") if k in obj),
        None,
    )
    props = {
        "payment_id": obj.get("id"),
        "amount_minor": amount if isinstance(amount, int) else None,
        "currency": str(obj.get("currency", "")).lower(),
    }
    return Plan({"email": email}, True, "payment_made", props)


PLANNERS: Mapping[str, Callable[[Inbound], Plan]] = {
    "api": _api,
    "site": _site,
    "tracking": _tracking,
    "booking": _booking,
    "payment": _payment,
}
"""The sources whose events only find or create a contact and record a contact event (a
tracked open or click also reports on its message, once the contact is known). Forms (a form
row, custom fields, tags, lists) and delivery reports (the message found by a write that comes
before the contact is known, suppression) are applied by their own handlers in ingest.py."""
