"""A verified source request as the one inbound event it stores (pure).

Payments arrive as Stripe events (``payment_intent.succeeded``, ``charge.succeeded``,
``checkout.session.completed`` → ``payment_made``). Bookings arrive in our shape
(``{"id", "type": "booking.created", "booking": {"id", "resource_id", "start", "attendee":
{"email", "name"}}}``) or as Cal.com's ``BOOKING_CREATED`` (``{"triggerEvent", "createdAt",
"payload": {"uid", "type", "startTime", "attendees": [{"email", "name"}]}}``), which is stored in
our shape with the event type's slug as the resource. Any other event type is acknowledged and
not stored (a provider sends every type an endpoint subscribed to, and pings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from app.errors import ValidationFailed

PAYMENT_TYPES = ("payment_intent.succeeded", "charge.succeeded", "checkout.session.completed")

EventId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


@dataclass(frozen=True, slots=True)
class Inbound:
    source: str
    """``payment`` or ``booking`` (what the ingest processor applies)."""
    name: str
    external_id: str
    """The sender's id of the event: a retry or a replay stores nothing new."""
    payload: dict[str, Any]


class _Event(msgspec.Struct):
    id: EventId
    type: str


class _CalAttendee(msgspec.Struct):
    email: str = ""
    name: str = ""


class _CalBooking(msgspec.Struct):
    uid: EventId
    type: str = ""
    startTime: str = ""
    attendees: list[_CalAttendee] = msgspec.field(default_factory=list)


class _CalEvent(msgspec.Struct):
    triggerEvent: str
    payload: dict[str, Any] = msgspec.field(default_factory=dict)


def _decode(body: bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        raise ValidationFailed.field("body", str(exc)) from None
    except msgspec.DecodeError:
        raise ValidationFailed.field("body", "not valid JSON") from None


def payment_event(body: bytes) -> Inbound | None:
    event: _Event = _decode(body, _Event)
    if event.type not in PAYMENT_TYPES:
        return None
    return Inbound("payment", "payment_made", event.id, msgspec.json.decode(body))


def booking_event(body: bytes) -> Inbound | None:
    event: _Event = _decode(body, _Event)
    if event.type != "booking.created":
        return None
    payload = msgspec.json.decode(body)
    if not isinstance(payload.get("booking"), dict):
        raise ValidationFailed.field("booking", "the booking is missing")
    return Inbound("booking", "booking_made", event.id, payload)


def calcom_event(body: bytes) -> Inbound | None:
    event: _CalEvent = _decode(body, _CalEvent)
    if event.triggerEvent != "BOOKING_CREATED":
        return None
    try:
        booking = msgspec.convert(event.payload, type=_CalBooking)
    except msgspec.ValidationError as exc:
        raise ValidationFailed.field("payload", str(exc)) from None
    attendee = next((a for a in booking.attendees if a.email), None)
    if attendee is None:
        raise ValidationFailed.field("payload.attendees", "the booking has no attendee e-mail")
    external_id = f"cal:{event.triggerEvent}:{booking.uid}"
    ours = {
        "id": external_id,
        "type": "booking.created",
        "provider": "calcom",
        "booking": {
            "id": booking.uid,
            "resource_id": booking.type,
            "start": booking.startTime,
            "attendee": {"email": attendee.email, "name": attendee.name},
        },
    }
    return Inbound("booking", "booking_made", external_id, ours)


def inbound_event(provider: str, receives: str, body: bytes) -> Inbound | None:
    """The event to store for a verified request, or ``None`` for a type nothing listens to."""
    if provider == "calcom":
        return calcom_event(body)
    return payment_event(body) if receives == "payment" else booking_event(body)
