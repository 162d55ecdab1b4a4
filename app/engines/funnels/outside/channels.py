"""The deliverer's senders for the outside actions, one channel each: ``sms``, ``push``,
``letter``, ``team`` (notify_team), ``http``, ``payment``, ``booking`` and ``ai``.

Every channel follows the same life: a result already recorded for this effect (an earlier
delivery finished but died before the outbox row was marked) is returned without calling out; the
workspace's provider is loaded at send time; the call carries the effect's idempotency key;
:class:`~app.integrations.http_guard.TransientError` becomes a deferred retry that honours the
provider's ``Retry-After``, :class:`~app.integrations.http_guard.PermanentError` a recorded failure.
What came back is recorded (:mod:`.results`) and the run waiting on it, if any, is woken.

Consent and suppression are checked by the deliverer before a channel is called, per channel name:
``sms``, ``push`` and ``letter`` follow the contact's consent and suppression for that channel.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

import msgspec
from sqlalchemy import select

from app.engines.funnels.contacts.channel_fields import LETTER_ADDRESS
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.channel import (
    LeasedEffect,
    PermanentDeliveryError,
    TransientDeliveryError,
)
from app.engines.funnels.outbox.payloads import (
    Ai,
    Booking,
    Http,
    Letter,
    Payload,
    Payment,
    Push,
    Request,
    Sms,
    Team,
)
from app.engines.funnels.outbox.work.channel_deps import ChannelDeps, ChannelFactory
from app.engines.funnels.outside import ai_ledger
from app.engines.funnels.outside import config as provider_config
from app.engines.funnels.outside.config import (
    LetterOptions,
    PaymentsOptions,
    Provider,
    PushOptions,
)
from app.engines.funnels.outside.results import Outcome, record, record_in, recorded
from app.integrations.ai import (
    build_messages,
    estimate_tokens,
    may_have_been_billed,
)
from app.integrations.booking import Attendee
from app.integrations.http_guard import (
    HttpRequest,
    PermanentError,
    TransientError,
)
from app.integrations.letter import Letter as PaperLetter
from app.integrations.letter import PostalAddress
from app.integrations.mail import (
    OutgoingEmail,
    PermanentMailError,
    TransientMailError,
)
from app.integrations.payments import CheckoutRequest, PaymentIntentRequest
from app.integrations.push import PushNotification
from app.integrations.sms import SmsMessage
from app.platform.models import Workspace
from app.platform.service import workspace_members

ADDRESS_FIELDS = LETTER_ADDRESS
"""Custom fields a contact needs for ``send_letter`` (``address_line2``, ``address_state`` too
when present; see :mod:`app.engines.funnels.contacts.channel_fields`)."""

P = TypeVar("P", bound=Payload)


class Refused(Exception):
    """The effect cannot be carried out as it stands (recorded as a permanent failure)."""

    code = "refused"


class OutsideChannel(ABC, Generic[P]):
    """The shared life of every outside channel; subclasses implement :meth:`call`, typed on
    their payload struct (:mod:`app.engines.funnels.outbox.payloads`)."""

    kind: str | None = None
    """Provider kind loaded for the call (``None``: the channel needs no provider)."""
    payload_type: type[P]
    """The struct of the effects this channel delivers."""

    def __init__(self, deps: ChannelDeps) -> None:
        self.deps = deps

    async def send(self, effect: LeasedEffect) -> str:
        earlier = await recorded(self.deps.db, effect.id)
        if earlier is not None:
            if earlier.ok:
                return _detail(earlier.result)
            raise PermanentDeliveryError(earlier.error or "failed earlier")
        provider = None
        if self.kind is not None:
            async with self.deps.db.read() as session:
                provider = await provider_config.load(
                    session, self.deps.secrets, effect.workspace_id, self.kind
                )
            if provider is None:
                # The workspace may configure it yet: retried until the attempts run out.
                raise TransientDeliveryError(f"no {self.kind} provider is configured")
        payload = effect.payload_as(self.payload_type)
        try:
            result = await self.call(effect, payload, provider)
        except TransientError as exc:
            raise TransientDeliveryError(str(exc), retry_after=exc.retry_after) from exc
        except (PermanentError, Refused) as exc:
            code = exc.code or "failed"
            await self._record(effect, Outcome(False, {"code": code}, str(exc)))
            raise PermanentDeliveryError(str(exc)) from exc
        except LookupError as exc:
            raise TransientDeliveryError(str(exc)) from exc
        await self._record(effect, Outcome(True, result, None))
        return _detail(result)

    @abstractmethod
    async def call(self, effect: LeasedEffect, p: P, provider: Provider | None) -> dict[str, Any]:
        """Perform the effect against the provider; the result is stored with the delivery."""

    async def _record(self, effect: LeasedEffect, outcome: Outcome) -> None:
        request = effect.payload if isinstance(effect.payload, Request) else None
        await record(
            self.deps.db,
            outbox_id=effect.id,
            workspace_id=effect.workspace_id,
            outcome=outcome,
            run_id=None if request is None else request.run_id,
            node_id=None if request is None else request.node_id,
            now=self.deps.clock.now(),
        )

    async def contact(self, effect: LeasedEffect) -> Contact:
        async with self.deps.db.read() as session:
            found = await session.get(Contact, effect.contact_id)
        if found is None:
            raise Refused("the contact no longer exists")
        return found


def _detail(result: dict[str, Any]) -> str:
    for name in ("message_id", "notification_id", "letter_id", "payment_id", "booking_id"):
        if result.get(name):
            return str(result[name])
    if "status" in result:
        return f"HTTP {result['status']}"
    if "text" in result:
        return "generated (cached)" if result.get("cached") else "generated"
    return str(result.get("summary", "done"))


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


class AiChannel(OutsideChannel[Ai]):
    """``ai_generate``: cache first (free), then the organisation's quota, then the call."""

    kind = "ai"
    payload_type = Ai

    async def call(self, effect: LeasedEffect, p: Ai, provider: Provider | None) -> dict[str, Any]:
        assert provider is not None
        ws = effect.workspace_id
        now = self.deps.clock.now
        async with self.deps.db.read() as session:
            hit = await ai_ledger.cached_text(session, ws, p.cache_key)
            org = await session.scalar(select(Workspace.organisation_id).where(Workspace.id == ws))
        if hit is not None:
            # Another contact with the same inputs paid for it meanwhile.
            return {"text": hit, "cached": True, "tokens": 0}
        if org is None:
            raise Refused("the workspace no longer exists")
        creative = p.creative
        messages = build_messages(creative, p.prompt)
        estimate = estimate_tokens(messages, creative.max_tokens)
        async with self.deps.db.write() as uow:
            decision = await ai_ledger.reserve(uow.session, org, estimate, now())
            if not decision.allowed:
                await ai_ledger.log_usage(
                    uow.session,
                    organisation_id=org,
                    workspace_id=ws,
                    key=effect.idempotency_key,
                    outcome="refused",
                    tokens=0,
                    model=creative.model,
                    detail=f"quota {decision.reason}",
                    now=now(),
                )
        if not decision.allowed:
            raise QuotaExhausted(
                f"AI quota {decision.reason}: {decision.remaining_tokens or 0} tokens left this "
                f"month, about {estimate} needed",
            )
        client = self.deps.clients.ai(provider)
        try:
            completion = await client.complete(
                messages,
                model=creative.model,
                max_tokens=creative.max_tokens,
                temperature=creative.temperature,
            )
        except BaseException as exc:
            await self._settle_failed(effect, org, creative.model, estimate, exc)
            raise
        tokens = completion.usage.total_tokens
        result = {"text": completion.text, "cached": False, "tokens": tokens}
        async with self.deps.db.write() as uow:
            # One transaction: the spend, its ledger line, the cache entry and the result.
            await ai_ledger.settle(uow.session, org, estimate, tokens, now())
            await ai_ledger.log_usage(
                uow.session,
                organisation_id=org,
                workspace_id=ws,
                key=effect.idempotency_key,
                outcome="generated",
                tokens=tokens,
                model=completion.model,
                detail=completion.finish_reason or "",
                now=now(),
            )
            await ai_ledger.cache_text(
                uow.session,
                workspace_id=ws,
                key=p.cache_key,
                text=completion.text,
                model=completion.model,
                tokens=tokens,
                now=now(),
            )
            await record_in(
                uow.session,
                outbox_id=effect.id,
                workspace_id=ws,
                outcome=Outcome(True, result, None),
                run_id=p.run_id,
                node_id=p.node_id,
                now=now(),
            )
        return result

    async def _settle_failed(
        self, effect: LeasedEffect, org: int, model: str, estimate: int, error: BaseException
    ) -> None:
        """A failed call gives its reservation back, unless the provider may have billed it (its
        reply was lost): then the reservation, the call's upper bound, stays spent and has its
        ledger line, so the retry's call is counted beside it, never instead of it."""
        now = self.deps.clock.now
        billed = may_have_been_billed(error)
        async with self.deps.db.write() as uow:
            await ai_ledger.settle(uow.session, org, estimate, estimate if billed else 0, now())
            if billed:
                await ai_ledger.log_usage(
                    uow.session,
                    organisation_id=org,
                    workspace_id=effect.workspace_id,
                    # One line per delivery attempt: each lost reply was a call of its own.
                    key=f"{effect.idempotency_key}#{effect.attempts}",
                    outcome="lost",
                    tokens=estimate,
                    model=model,
                    detail=f"reply lost, counted at its reservation: {error}",
                    now=now(),
                )


class QuotaExhausted(Refused):
    """The organisation's AI quota does not cover this generation."""

    code = "ai_quota_exhausted"


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
