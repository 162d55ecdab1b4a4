"""The outbox contract: what an effect carries to its channel, one msgspec struct per channel in a
versioned tagged union.

A node builds the struct of its channel (:class:`Email`, :class:`Sms`, … :class:`Ai`); the runner
stores it as the effect row's ``payload`` JSON, its tag in ``format`` (``email/1``: the channel
and the version of its shape); the deliverer decodes the row when it leases it and each channel
reads the struct it is typed on. So a field a channel reads is a field every row of that channel
has, checked by mypy where it is written and where it is read.

Rows written before the tag existed carry no ``format``: they are version 1 of their row's
``channel``, the same fields (:func:`decode` takes the tag from the channel column). A row that
does not decode — a missing or mistyped field, an unknown channel or version, a tag of another
channel — is :class:`Unreadable`: the deliverer records it as failed with the reason, once,
instead of retrying a send that cannot work.

A changed shape is a new struct with the next version's tag (``email/2``) beside the old one in
:data:`EffectPayload`, kept as long as rows of the old version may be pending.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import msgspec

from app.integrations.ai import Creative


class Payload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="format"):
    """What every effect payload is: the struct of one channel, tagged ``<channel>/<version>``."""

    channel: ClassVar[str]
    """The outbox channel this payload is delivered on (the row's ``channel``)."""


class Message(Payload, frozen=True, kw_only=True):
    """A message to the contact, counted by the frequency cap unless transactional."""

    when_capped: str | None = None
    """What the frequency cap does to it: ``skip``, or wait (``wait``, or absent in old rows)."""
    transactional: bool = False
    """Asked for by the contact (a receipt, a password reset): marketing choices do not apply."""
    quiet_hours: tuple[int, int] | None = None
    """The local start and end hour it may not go out between (the run's or the funnel's),
    checked again at send time: a retry or a capped wait may end inside them."""


class Email(Message, frozen=True, kw_only=True, tag="email/1"):
    """``send_email``, and the basic ``notify_team`` (``internal``) on the e-mail channel."""

    channel = "email"
    to: list[str]
    subject: str
    text: str
    html: str | None = None
    message_id: str
    """Stable per effect: a redelivery carries the same Message-ID."""
    topic: str | None = None
    """The topic a contact can leave (absent: ``marketing``)."""
    internal: bool = False
    """About the contact, not to them (a team notification): no consent, tracking or links."""


class Sms(Message, frozen=True, kw_only=True, tag="sms/1"):
    channel = "sms"
    to: str
    text: str


class Push(Message, frozen=True, kw_only=True, tag="push/1"):
    channel = "push"
    title: str
    body: str


class Letter(Message, frozen=True, kw_only=True, tag="letter/1"):
    channel = "letter"
    content: str


class Team(Payload, frozen=True, kw_only=True, tag="team/1"):
    """``notify_team`` to members of the workspace, resolved when it is sent."""

    channel = "team"
    to: list[str]
    """``@all``, ``@admins`` or members' e-mail addresses."""
    subject: str
    text: str
    message_id: str
    internal: bool = True
    """Always: about the contact, not to them."""


class Request(Payload, frozen=True, kw_only=True):
    """A request whose answer the run waits for: the result is recorded for its node."""

    run_id: int
    node_id: str


class Http(Request, frozen=True, kw_only=True, tag="http/1"):
    channel = "http"
    method: str
    url: str
    headers: dict[str, str]
    body: str | None = None
    to_contact: str | None = None
    """The channel on which the request messages the contact (``None``: it does not); the
    three fields below are the message's, as on :class:`Message`."""
    topic: str | None = None
    transactional: bool = False
    quiet_hours: tuple[int, int] | None = None


class Payment(Request, frozen=True, kw_only=True, tag="payment/1"):
    channel = "payment"
    amount_minor: int
    currency: str
    description: str
    email: str | None = None


class Booking(Request, frozen=True, kw_only=True, tag="booking/1"):
    channel = "booking"
    resource: str
    window_start: str
    """ISO 8601, the moment the node ran: the window is searched from there."""


class Ai(Request, frozen=True, kw_only=True, tag="ai/1"):
    channel = "ai"
    creative: Creative
    prompt: str
    """The prompt with the contact's merge variables filled in."""
    cache_key: str


Requested = Http | Payment | Booking | Ai
"""The requests whose answer a run waits for."""
EffectPayload = Email | Sms | Push | Letter | Team | Requested
"""Every payload an effect row may carry, told apart by ``format``."""


class Unreadable(msgspec.Struct, frozen=True):
    """A stored payload that does not decode; never delivered, recorded as failed."""

    reason: str


def encode(payload: EffectPayload) -> dict[str, Any]:
    """The row's ``payload`` JSON, its tag included."""
    stored: dict[str, Any] = msgspec.to_builtins(payload)
    return stored


def decode(channel: str, raw: Any) -> EffectPayload | Unreadable:
    """The struct of a stored row (``raw``: the JSON column's value, or its text)."""
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError as exc:
        return Unreadable(f"the payload is not JSON: {exc}")
    if not isinstance(value, dict):
        return Unreadable("the payload is not a JSON object")
    tag = value.get("format", f"{channel}/1")
    if not isinstance(tag, str) or tag.partition("/")[0] != channel:
        return Unreadable(f"a {tag!r} payload on the {channel} channel")
    try:
        decoded: EffectPayload = msgspec.convert({**value, "format": tag}, type=EffectPayload)
    except msgspec.ValidationError as exc:
        return Unreadable(f"the {tag} payload does not decode: {exc}")
    return decoded


def content(payload: EffectPayload) -> dict[str, Any]:
    """The payload's fields as a person reads them (the simulator's messages): no tag."""
    fields = encode(payload)
    fields.pop("format", None)
    return fields
