"""The deliverer's senders for the outside actions, one channel each: ``sms``, ``push``,
``letter``, ``team`` (notify_team), ``http``, ``payment``, ``booking`` and ``ai``.

Every channel follows the same life (:mod:`.channel_base`): a result already recorded is
returned without calling out, a transient failure is retried later, a permanent one recorded.
The ``ai`` channel, metered against the organisation's quota, is :mod:`.ai_channel`.

Consent and suppression are checked by the deliverer before a channel is called, per channel name:
``sms``, ``push`` and ``letter`` follow the contact's consent and suppression for that channel.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import select

from app.engines.funnels.contacts.channel_fields import LETTER_ADDRESS
from app.engines.funnels.outbox.channel import LeasedEffect
from app.engines.funnels.outbox.payloads import Booking, Http, Letter, Payment, Push, Sms, Team
from app.engines.funnels.outbox.work.channel_deps import ChannelFactory
from app.engines.funnels.outside import config as provider_config
from app.engines.funnels.outside.ai_channel import AiChannel
from app.engines.funnels.outside.channel_base import OutsideChannel, Refused
from app.engines.funnels.outside.config import LetterOptions, PaymentsOptions, Provider, PushOptions
from app.integrations.booking import Attendee
from app.integrations.http_guard import HttpRequest, PermanentError, TransientError
from app.integrations.letter import Letter as PaperLetter
from app.integrations.letter import PostalAddress
from app.integrations.mail import OutgoingEmail, PermanentMailError, TransientMailError
from app.integrations.payments import CheckoutRequest, PaymentIntentRequest
from app.integrations.push import PushNotification
from app.integrations.sms import SmsMessage
from app.platform.models import Workspace
from app.platform.service import workspace_members

ADDRESS_FIELDS = LETTER_ADDRESS
"""Custom fields a contact needs for ``send_letter`` (``address_line2``, ``address_state`` too
when present; see :mod:`app.engines.funnels.contacts.channel_fields`)."""


class SmsChannel(OutsideChannel[Sms]):
    kind = "sms"
    payload_type = Sms

    async def call(self, effect: LeasedEffect, p: Sms, provider: Provider | None) -> dict[str, Any]:
        assert provider is not None
        client = self.deps.clients.sms(provider)
        receipt = await client.send(
            SmsMessage(to=p.to, body=p.text),
            idempotency_key=effect.idempotency_key,
            # ``attempts`` counts this delivery too: more than one means an earlier one may have
            # reached the provider.
            previously_attempted=effect.attempts > 1,
        )
        return {"message_id": receipt.message_id, "status": receipt.status}


class PushChannel(OutsideChannel[Push]):
    kind = "push"
    payload_type = Push

    async def call(
        self, effect: LeasedEffect, p: Push, provider: Provider | None
    ) -> dict[str, Any]:
        assert provider is not None
        options: PushOptions = provider.options
        token = ((await self.contact(effect)).fields or {}).get(options.token_field)
        if not isinstance(token, str) or not token:
            raise Refused(f"the contact has no device token in '{options.token_field}'")
        client = self.deps.clients.push(provider)
        receipt = await client.send(
            PushNotification(device_token=token, title=p.title, body=p.body),
            idempotency_key=effect.idempotency_key,
        )
        return {"notification_id": receipt.notification_id, "status": receipt.status}


class LetterChannel(OutsideChannel[Letter]):
    kind = "letter"
    payload_type = Letter

    async def call(
        self, effect: LeasedEffect, p: Letter, provider: Provider | None
    ) -> dict[str, Any]:
        assert provider is not None
        options: LetterOptions = provider.options
        contact = await self.contact(effect)
        fields = contact.fields or {}
        missing = [name for name in ADDRESS_FIELDS if not fields.get(name)]
        if missing:
            raise Refused(f"the contact's postal address is incomplete ({', '.join(missing)})")
        name = f"{contact.first_name} {contact.last_name}".strip() or (contact.email or "")
        address = PostalAddress(
            name=name,
            line1=str(fields["address_line1"]),
            line2=str(fields["address_line2"]) if fields.get("address_line2") else None,
            city=str(fields["address_city"]),
            postal_code=str(fields["address_postal_code"]),
            state=str(fields["address_state"]) if fields.get("address_state") else None,
            country=str(fields["address_country"]).upper(),
        )
        client = self.deps.clients.letter(provider)
        receipt = await client.send(
            PaperLetter(to=address, content=p.content, color=options.color),
            idempotency_key=effect.idempotency_key,
        )
        delivery = receipt.expected_delivery_date
        return {
            "letter_id": receipt.letter_id,
            "status": receipt.status,
            "expected_delivery_date": delivery.isoformat() if delivery else None,
        }


def team_recipients(to: list[str], members: list[tuple[str, str]]) -> list[str]:
    """Addresses of the workspace members ``to`` names: ``@all``, ``@admins`` or a member's
    e-mail. Anything else is dropped: a team notification skips the contact's consent, so it
    must never reach someone outside the team."""
    wanted = {entry.strip().lower() for entry in to}
    out = []
    for email, role in members:
        if "@all" in wanted or ("@admins" in wanted and role == "admin") or email.lower() in wanted:
            out.append(email)
    return out


class TeamChannel(OutsideChannel[Team]):
    """``notify_team``: an e-mail to members of the workspace, resolved at send time."""

    payload_type = Team

    async def call(
        self, effect: LeasedEffect, p: Team, provider: Provider | None
    ) -> dict[str, Any]:
        async with self.deps.db.read() as session:
            members = await workspace_members(session, effect.workspace_id, limit=1000)
        recipients = team_recipients(list(p.to), [(u.email, role) for u, role in members])
        if not recipients:
            raise Refused(f"no member of the workspace matches {', '.join(p.to)}")
        try:
            await self.deps.team_mail.send(
                OutgoingEmail(
                    to=recipients,
                    subject=p.subject,
                    text=p.text,
                    message_id=p.message_id,
                    headers={"X-Sweepline-Effect": effect.idempotency_key},
                )
            )
        except TransientMailError as exc:
            raise TransientError(str(exc), provider="smtp") from exc
        except PermanentMailError as exc:
            raise PermanentError(str(exc), provider="smtp") from exc
        return {"message_id": p.message_id, "to": recipients}


class HttpChannel(OutsideChannel[Http]):
    """``http_request``: through the guarded client, refusing private and local targets unless the
    workspace allows them (checked at send time, on every address the name resolves to)."""

    payload_type = Http

    async def call(
        self, effect: LeasedEffect, p: Http, provider: Provider | None
    ) -> dict[str, Any]:
        async with self.deps.db.read() as session:
            options = await provider_config.http_options(session, effect.workspace_id)
            allow_private = bool(
                await session.scalar(
                    select(Workspace.allow_private_http).where(Workspace.id == effect.workspace_id)
                )
            )
        guarded = self.deps.clients.http(options)
        result = await guarded.request(
            HttpRequest(method=p.method, url=p.url, headers=dict(p.headers), body=p.body),
            allow_private=allow_private,
            idempotency_key=effect.idempotency_key,
        )
        out: dict[str, Any] = msgspec.to_builtins(result)
        return out


class PaymentChannel(OutsideChannel[Payment]):
    """``create_payment`` on the workspace's own Stripe-compatible account."""

    kind = "payments"
    payload_type = Payment

    async def call(
        self, effect: LeasedEffect, p: Payment, provider: Provider | None
    ) -> dict[str, Any]:
        assert provider is not None
        options: PaymentsOptions = provider.options
        client = self.deps.clients.payments(provider)
        metadata = {"run": str(p.run_id), "contact": str(effect.contact_id)}
        if options.success_url:
            session = await client.create_checkout_session(
                CheckoutRequest(
                    product_name=p.description or "Payment",
                    unit_amount=p.amount_minor,
                    currency=p.currency,
                    success_url=options.success_url,
                    cancel_url=options.cancel_url,
                    customer_email=p.email,
                    client_reference_id=effect.idempotency_key,
                    metadata=metadata,
                ),
                idempotency_key=effect.idempotency_key,
            )
            return {"payment_id": session.id, "url": session.url, "status": session.payment_status}
        intent = await client.create_payment_intent(
            PaymentIntentRequest(
                amount=p.amount_minor,
                currency=p.currency,
                description=p.description or None,
                receipt_email=p.email,
                metadata=metadata,
            ),
            idempotency_key=effect.idempotency_key,
        )
        return {
            "payment_id": intent.id,
            "url": None,
            "status": intent.status,
            "client_secret": intent.client_secret,
        }


class BookingChannel(OutsideChannel[Booking]):
    """``book_slot``: the first free slot of the resource in the window the node ran in."""

    kind = "booking"
    payload_type = Booking

    async def call(
        self, effect: LeasedEffect, p: Booking, provider: Provider | None
    ) -> dict[str, Any]:
        assert provider is not None
        contact = await self.contact(effect)
        if not contact.email:
            raise Refused("the contact has no e-mail address to book under")
        start = datetime.fromisoformat(p.window_start)
        end = start + timedelta(days=provider.options.window_days)
        client = self.deps.clients.booking(provider)
        name = f"{contact.first_name} {contact.last_name}".strip() or contact.email
        booking = await client.book_first_available(
            p.resource,
            Attendee(name=name, email=contact.email, phone=contact.phone),
            start=start,
            end=end,
            idempotency_key=effect.idempotency_key,
        )
        return {
            "booking_id": booking.id,
            "status": booking.status,
            "start": booking.start.isoformat(),
            "end": booking.end.isoformat(),
        }


CHANNEL_TYPES: dict[str, type[OutsideChannel[Any]]] = {
    "sms": SmsChannel,
    "push": PushChannel,
    "letter": LetterChannel,
    "team": TeamChannel,
    "http": HttpChannel,
    "payment": PaymentChannel,
    "booking": BookingChannel,
    "ai": AiChannel,
}


def factories() -> dict[str, ChannelFactory]:
    """The outside channels by name, each the factory of its sender (for the plugin's table)."""
    return {name: kind for name, kind in CHANNEL_TYPES.items()}
