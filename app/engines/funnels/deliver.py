"""The deliverer: sends committed outbox effects, after commit, each with its idempotency key.

It leases pending effects in batches (the lease moves ``next_attempt_at`` to the lease expiry, so
an effect whose deliverer died is due again by itself). **At send time** it re-reads the contact:
deleted, suppressed on the channel, or consent withdrawn → the effect is skipped, not sent (hard
case 2: checking at enqueue time would mail people who left during a wait). Transient failures are
retried with exponential backoff; permanent ones are recorded. Every outcome is a delivery event.

Channels plug in by name (:func:`register_channel`): ``email`` is built in, the other channels
add their senders the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import select, update

from app.db.dialect import insert, row_count
from app.db.session import Database, WriteSession
from app.engines.funnels.models import (
    OUTBOX_FAILED,
    OUTBOX_PENDING,
    OUTBOX_SENT,
    OUTBOX_SKIPPED,
    Contact,
    DeliveryEvent,
    OutboxEffect,
)
from app.engines.funnels.tracking import MessageRef, Tracking, text_to_html, track_html
from app.engines.funnels.unsubscribe import (
    UnsubscribeLinks,
    UnsubscribeRef,
    hard_suppression,
    links_for,
    topic_of,
    unsubscribed_from,
    with_links,
)
from app.integrations.mail import (
    MailSender,
    OutgoingEmail,
    PermanentMailError,
    TransientMailError,
)
from app.scheduling.claim import Claim, Lease
from app.settings import FunnelSettings

if TYPE_CHECKING:
    from app.clock import Clock

log = logging.getLogger(__name__)


class TransientDeliveryError(Exception):
    """Worth retrying later (4xx, timeouts, connection failures)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds the provider asked us to wait, when it said so (the retry is not sooner)."""


class PermanentDeliveryError(Exception):
    """Retrying cannot help (refused address, invalid request)."""


@dataclass(frozen=True, slots=True)
class LeasedEffect:
    id: int
    workspace_id: int
    contact_id: int
    channel: str
    idempotency_key: str
    payload: dict[str, Any]
    attempts: int


class ChannelSender(Protocol):
    async def send(self, effect: LeasedEffect) -> str:
        """Deliver one effect; returns a short detail for the delivery record (e.g. the
        provider's message id). Raises Transient/PermanentDeliveryError."""
        ...


ChannelFactory = Callable[[Any], ChannelSender]
"""Builds a channel's sender from the job context's resources and settings."""

CHANNELS: dict[str, ChannelFactory] = {}


def register_channel(name: str, factory: ChannelFactory) -> None:
    CHANNELS[name] = factory


TrackingLookup = Callable[[int], Awaitable[Tracking | None]]
"""The tracking settings of a workspace (``None``: send the message untracked)."""


class EmailChannel:
    """E-mail over SMTP. The effect's Message-ID is stable, so a redelivery is recognisable.

    Marketing mail to a contact (anything neither ``internal`` nor ``transactional``) gets its
    signed unsubscribe links at send time: the ``List-Unsubscribe`` / ``List-Unsubscribe-Post``
    headers (RFC 8058), the ``{{unsubscribe_url}}`` placeholders filled in, a footer when the
    creative has none (see :mod:`app.engines.funnels.unsubscribe`). ``signing`` gives the
    workspace's public URL and secret; without it marketing mail is refused rather than sent
    without a way out.

    With ``tracking``, a message to a contact carries the open pixel and signed redirect links
    naming its effect (a text-only message gets an HTML alternative to carry them), so opens and
    clicks of funnel mail are ``message_opened`` / ``link_clicked`` events like a campaign's.
    Team notifications (``internal``) are neither tracked nor given unsubscribe links: they are
    not read by the contact.
    """

    def __init__(
        self,
        sender: MailSender,
        tracking: TrackingLookup | None = None,
        *,
        signing: TrackingLookup | None = None,
        mailto_address: str = "",
    ) -> None:
        self.sender = sender
        self.tracking = tracking
        self.signing = signing
        self.mailto_address = mailto_address

    def _ref(self, effect: LeasedEffect) -> MessageRef:
        return MessageRef(effect.workspace_id, effect.contact_id, effect=effect.idempotency_key)

    async def _links(self, effect: LeasedEffect) -> UnsubscribeLinks | None:
        p = effect.payload
        if p.get("internal") or p.get("transactional"):
            return None
        signing = None if self.signing is None else await self.signing(effect.workspace_id)
        if signing is None:
            raise PermanentDeliveryError("marketing mail needs signed unsubscribe links")
        ref = UnsubscribeRef(self._ref(effect), topic_of(p.get("topic")))
        return links_for(signing.base_url, signing.secret, ref, mailto_address=self.mailto_address)

    async def _tracked(self, effect: LeasedEffect, text: str, html: str | None) -> str | None:
        if self.tracking is None or effect.payload.get("internal"):
            return html
        tracking = await self.tracking(effect.workspace_id)
        if tracking is None:
            return html
        return track_html(html or text_to_html(text), tracking, self._ref(effect))

    async def compose(self, effect: LeasedEffect) -> OutgoingEmail:
        p = effect.payload
        text: str = p["text"]
        html: str | None = p.get("html")
        headers = {"X-Sweepline-Effect": effect.idempotency_key}
        links = await self._links(effect)
        if links is not None:
            text, html, _ = with_links(text, html, links)
            headers.update(links.headers())
        return OutgoingEmail(
            to=list(p["to"]),
            subject=p["subject"],
            text=text,
            html=await self._tracked(effect, text, html),
            message_id=p["message_id"],
            headers=headers,
        )

    async def send(self, effect: LeasedEffect) -> str:
        email = await self.compose(effect)
        try:
            await self.sender.send(email)
        except TransientMailError as exc:
            raise TransientDeliveryError(str(exc)) from exc
        except PermanentMailError as exc:
            raise PermanentDeliveryError(str(exc)) from exc
        return email.message_id


DELIVERY = Claim(
    table=OutboxEffect.__table__,  # type: ignore[arg-type]
    due="status = 'pending' AND next_attempt_at <= :now",
    order_by="next_attempt_at",
    returning=(
        "id",
        "workspace_id",
        "contact_id",
        "channel",
        "idempotency_key",
        "payload",
        "attempts",
    ),
    owner="lease_owner",
    # The lease expiry is the due time: an effect whose deliverer died is due again by itself.
    expires="next_attempt_at",
    sets={"attempts": "attempts + 1"},
    held="status = 'pending'",
)


def _payload(raw: Any) -> dict[str, Any]:
    value = json.loads(raw) if isinstance(raw, str | bytes) else raw
    return dict(value or {})


def blocked_reason(contact: Contact | None, channel: str, payload: dict[str, Any]) -> str | None:
    """Why this effect must not go out now, checked at send time; ``None`` when it may."""
    if contact is None or contact.deleted_at is not None:
        return "contact deleted"
    if payload.get("internal"):
        return None
    if channel == "email":
        hard = hard_suppression(contact.suppressed)
        if hard is not None:
            return f"suppressed on email: {hard}"
        if payload.get("transactional"):
            return None  # asked for by the contact: marketing choices do not apply
        chose = unsubscribed_from(contact.suppressed, topic_of(payload.get("topic")))
        if chose is not None:
            return chose
    else:
        suppressed = (contact.suppressed or {}).get(channel)
        if suppressed:
            return f"suppressed on {channel}: {suppressed}"
    if (contact.consent or {}).get(channel) == "withdrawn":
        return f"consent withdrawn for {channel}"
    return None


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    leased: int = 0
    sent: int = 0
    skipped: int = 0
    deferred: int = 0
    failed: int = 0


class Deliverer:
    def __init__(
        self,
        db: Database,
        settings: FunnelSettings,
        senders: Callable[[str], ChannelSender | None],
        *,
        lease_seconds: int = 120,
        clock: Clock | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.senders = senders
        self.lease_seconds = lease_seconds
        self.clock = clock
        """With a clock, a batch's leases are renewed while it is delivered (a batch may take
        longer than one lease: 50 messages to a slow SMTP server)."""

    async def lease(self, *, owner: str, now: datetime, limit: int) -> list[LeasedEffect]:
        rows = await DELIVERY.take(
            self.db, now=now, limit=limit, owner=owner, lease_seconds=self.lease_seconds
        )
        return [
            LeasedEffect(r[0], r[1], r[2], r[3], r[4], _payload(r[5]), r[6])
            for r in sorted(rows, key=lambda r: r[0])
        ]

    async def run_batch(
        self, *, owner: str, now: Callable[[], datetime], limit: int | None = None
    ) -> DeliveryResult:
        """Lease and deliver one batch. ``now`` is called per effect: sends take real time."""
        leased_at = now()
        effects = await self.lease(
            owner=owner, now=leased_at, limit=limit or self.settings.deliver_batch
        )
        counts = {"sent": 0, "skipped": 0, "deferred": 0, "failed": 0}
        if not effects:
            return DeliveryResult()
        if self.clock is None:
            for effect in effects:
                counts[await self.deliver(effect, owner=owner, now=now)] += 1
            return DeliveryResult(leased=len(effects), **counts)
        async with Lease(
            DELIVERY,
            self.db,
            self.clock,
            owner=owner,
            keys=[e.id for e in effects],
            lease_seconds=self.lease_seconds,
            claimed_at=leased_at,
        ) as lease:
            for effect in effects:
                counts[await self.deliver(effect, owner=owner, now=now, lease=lease)] += 1
                lease.done(effect.id)
        return DeliveryResult(leased=len(effects), **counts)

    async def deliver(
        self,
        effect: LeasedEffect,
        *,
        owner: str,
        now: Callable[[], datetime],
        lease: Lease | None = None,
    ) -> str:
        async with self.db.read() as session:
            contact = await session.get(Contact, effect.contact_id)
            still_ours = await session.scalar(
                select(OutboxEffect.id).where(
                    OutboxEffect.id == effect.id,
                    OutboxEffect.status == OUTBOX_PENDING,
                    OutboxEffect.lease_owner == owner,
                    # An expired lease is no longer ours, even before another deliverer takes it.
                    OutboxEffect.next_attempt_at > now(),
                )
            )
        if still_ours is None or (lease is not None and not lease.holds(effect.id)):
            # Cancelled (contact deleted, goal reached) after we leased it, or our lease ran
            # out: whoever holds it now delivers it.
            return "skipped"
        reason = blocked_reason(contact, effect.channel, effect.payload)
        if reason is not None:
            await self._finish(effect, owner, now(), OUTBOX_SKIPPED, "suppressed", reason)
            return "skipped"
        sender = self.senders(effect.channel)
        if sender is None:
            await self._retry(effect, owner, now(), f"no sender for channel {effect.channel}")
            return "deferred"
        try:
            detail = await sender.send(effect)
        except TransientDeliveryError as exc:
            return await self._retry(effect, owner, now(), str(exc), exc.retry_after)
        except PermanentDeliveryError as exc:
            await self._finish(effect, owner, now(), OUTBOX_FAILED, "failed", str(exc))
            return "failed"
        await self._finish(effect, owner, now(), OUTBOX_SENT, "sent", detail)
        return "sent"

    async def _retry(
        self,
        effect: LeasedEffect,
        owner: str,
        at: datetime,
        error: str,
        retry_after: float | None = None,
    ) -> str:
        if effect.attempts >= self.settings.max_send_attempts:
            await self._finish(effect, owner, at, OUTBOX_FAILED, "failed", f"gave up: {error}")
            return "failed"
        delay = max(self.settings.retry_base_seconds * 2 ** (effect.attempts - 1), retry_after or 0)
        retry_at = at + timedelta(seconds=min(delay, 6 * 3600))
        async with self.db.write() as uow:
            await uow.session.execute(
                update(OutboxEffect)
                .where(OutboxEffect.id == effect.id, OutboxEffect.lease_owner == owner)
                .values(next_attempt_at=retry_at, lease_owner=None, last_error=error[:2000])
            )
            await _event(
                uow.session, effect, "deferred", f"{error} (retry at {retry_at.isoformat()})", at
            )
        return "deferred"

    async def _finish(
        self, effect: LeasedEffect, owner: str, at: datetime, status: str, kind: str, detail: str
    ) -> None:
        async with self.db.write() as uow:
            result = await uow.session.execute(
                update(OutboxEffect)
                .where(
                    OutboxEffect.id == effect.id,
                    OutboxEffect.lease_owner == owner,
                    OutboxEffect.status == OUTBOX_PENDING,
                )
                .values(
                    status=status,
                    finished_at=at,
                    lease_owner=None,
                    last_error=None if status == OUTBOX_SENT else detail[:2000],
                )
            )
            if row_count(result):
                await _event(uow.session, effect, kind, detail, at)


async def _event(
    session: WriteSession, effect: LeasedEffect, kind: str, detail: str, at: datetime
) -> None:
    await session.execute(
        insert(session, DeliveryEvent).values(
            workspace_id=effect.workspace_id,
            outbox_id=effect.id,
            contact_id=effect.contact_id,
            kind=kind,
            detail=detail[:2000],
            at=at,
        )
    )


SenderLookup = Callable[[str], ChannelSender | None]
Flush = Callable[[], Awaitable[None]]
