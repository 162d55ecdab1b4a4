"""The deliverer: sends committed outbox effects, after commit, each with its idempotency key.

It leases pending effects in batches (the lease moves ``next_attempt_at`` to the lease expiry, so
an effect whose deliverer died is due again by itself). **At send time** it asks the consent gate
(:mod:`app.engines.funnels.consent`) about every effect of the batch, on every channel: a deleted
contact, a bounce or complaint, an unsubscribe (all, the topic, the channel), consent withdrawn,
an erased address's kept suppression → skipped with the reason, not sent (hard case 2: checking
at enqueue time would mail people who left during a wait); quiet hours or the frequency cap →
held until the time the gate names. Transient failures are retried with exponential backoff;
permanent ones are recorded, and the run of a message that failed for good takes its failure
branch or ends ``failed`` (never ``completed``). Every outcome is a delivery event.

Channels plug in by name: the deliverer asks its ``senders`` for the sender of an effect's channel;
the engine's table of channels (``email``, defined here, and the outside ones) is built by the
plugin (:data:`app.engines.funnels.plugin.CHANNELS`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, TypeVar

from sqlalchemy import insert as core_insert
from sqlalchemy import select, update

from app.db.dialect import row_count
from app.db.session import Database, WriteSession
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.gate import message_of
from app.engines.funnels.consent.policy import (
    SEND,
    Decision,
    Person,
    Send,
    Skip,
    WaitUntil,
    after_cap,
    decide,
)
from app.engines.funnels.events.tracking import (
    MessageRef,
    Tracking,
    text_to_html,
    track_html,
    track_text,
)
from app.engines.funnels.models import (
    OUTBOX_FAILED,
    OUTBOX_PENDING,
    OUTBOX_SENT,
    OUTBOX_SKIPPED,
    DeliveryEvent,
    OutboxEffect,
    Step,
)
from app.engines.funnels.outbox import frequency, payloads
from app.engines.funnels.outbox.payloads import EffectPayload, Email, Unreadable
from app.engines.funnels.outbox.recorded_slots import send_and_record
from app.engines.funnels.outbox.states import OUTBOX
from app.engines.funnels.outbox.unsubscribe import (
    UnsubscribeLinks,
    UnsubscribeRef,
    links_for,
    topic_of,
    with_links,
)
from app.engines.funnels.runs.work.effect_failures import after_failed_send, lock_runs_of
from app.integrations.mail import (
    OutgoingEmail,
    PermanentMailError,
    TransientMailError,
)
from app.scheduling.claim import Claim, Lease
from app.settings import FunnelSettings

if TYPE_CHECKING:
    from app.clock import Clock

log = logging.getLogger(__name__)

P = TypeVar("P", bound=payloads.Payload)


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
    payload: EffectPayload | Unreadable
    """The row's payload decoded into its channel's struct, or why it does not decode."""
    attempts: int

    def payload_as(self, kind: type[P]) -> P:
        """The payload as the struct a channel is typed on (a mismatch cannot be delivered)."""
        if not isinstance(self.payload, kind):
            raise PermanentDeliveryError(
                f"the {self.channel} channel cannot deliver {type(self.payload).__name__}"
            )
        return self.payload


class ChannelSender(Protocol):
    async def send(self, effect: LeasedEffect) -> str:
        """Deliver one effect; returns a short detail for the delivery record (e.g. the
        provider's message id). Raises Transient/PermanentDeliveryError."""
        ...


class MailTransport(Protocol):
    """Hands a message to the SMTP server (:class:`~app.integrations.mail.MailSender`, one
    conversation per message, or :class:`~app.integrations.mail.SmtpPool`, persistent ones)."""

    async def send(self, email: OutgoingEmail) -> None: ...


TrackingLookup = Callable[[int], Awaitable[Tracking | None]]
"""The tracking settings of a workspace (``None``: send the message untracked)."""


class EmailChannel:
    """E-mail over SMTP. The effect's Message-ID is stable, so a redelivery is recognisable.

    Marketing mail to a contact (anything neither ``internal`` nor ``transactional``) gets its
    signed unsubscribe links at send time: the ``List-Unsubscribe`` / ``List-Unsubscribe-Post``
    headers (RFC 8058), the ``{{unsubscribe_url}}`` placeholders filled in, a footer when the
    creative has none (see :mod:`app.engines.funnels.outbox.unsubscribe`). ``signing`` gives the
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
        sender: MailTransport,
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

    async def _links(self, effect: LeasedEffect, p: Email) -> UnsubscribeLinks | None:
        if p.internal or p.transactional:
            return None
        signing = None if self.signing is None else await self.signing(effect.workspace_id)
        if signing is None:
            raise PermanentDeliveryError("marketing mail needs signed unsubscribe links")
        ref = UnsubscribeRef(self._ref(effect), topic_of(p.topic))
        return links_for(signing.base_url, signing.secret, ref, mailto_address=self.mailto_address)

    async def _tracked(
        self, effect: LeasedEffect, p: Email, text: str, html: str | None
    ) -> tuple[str, str | None]:
        """The text and HTML parts with their links tracked (and the pixel in the HTML)."""
        if self.tracking is None or p.internal:
            return text, html
        tracking = await self.tracking(effect.workspace_id)
        if tracking is None:
            return text, html
        ref = self._ref(effect)
        html = track_html(html or text_to_html(text), tracking, ref)
        return track_text(text, tracking, ref), html

    async def compose(self, effect: LeasedEffect) -> OutgoingEmail:
        p = effect.payload_as(Email)
        text, html = p.text, p.html
        headers = {"X-Sweepline-Effect": effect.idempotency_key}
        links = await self._links(effect, p)
        if links is not None:
            text, html, _ = with_links(text, html, links)
            headers.update(links.headers())
        text, html = await self._tracked(effect, p, text, html)
        return OutgoingEmail(
            to=list(p.to),
            subject=p.subject,
            text=text,
            html=html,
            message_id=p.message_id,
            headers=headers,
        )

    async def aclose(self) -> None:
        close = getattr(self.sender, "aclose", None)
        if close is not None:
            await close()

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
    due=f"{OUTBOX.where(OUTBOX_PENDING)} AND next_attempt_at <= :now",
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
    held=OUTBOX.where(OUTBOX_PENDING),
)


def decisions(
    effects: list[LeasedEffect], people: dict[int, Person], now: datetime
) -> dict[int, Decision]:
    """What the consent gate says of each effect at send time (hard case 2, FN-31, FN-32). An
    unreadable payload is not the gate's to judge: it fails on its own."""
    return {
        e.id: SEND
        if isinstance(e.payload, Unreadable)
        else decide(message_of(e.channel, e.payload), people.get(e.contact_id), now)
        for e in effects
    }


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    leased: int = 0
    sent: int = 0
    skipped: int = 0
    deferred: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What became of one effect, waiting to be recorded with the others of its group."""

    effect: LeasedEffect
    count: str
    """The :class:`DeliveryResult` field it counts in."""
    at: datetime
    status: str | None = None
    """The effect's final status, or ``None``: retried later, or not ours to record."""
    kind: str = ""
    detail: str = ""
    retry: bool = False
    retry_after: float | None = None
    capped_until: datetime | None = None
    """Held by the frequency cap until then (the funnel said wait)."""
    step_note: dict[str, str] | None = None
    """Added to the sending step's output as ``frequency_cap`` (what the cap did)."""


def _capped(effect: LeasedEffect, until: datetime, at: datetime) -> _Outcome:
    """What the frequency cap does to a message of a funnel (the gate's rule 7): wait for
    ``until`` or skip it."""
    payload = effect.payload
    said = (
        after_cap(message_of(effect.channel, payload), until)
        if not isinstance(payload, Unreadable)
        else WaitUntil(until, "", "frequency_cap")
    )
    if isinstance(said, Skip):
        return _Outcome(
            effect,
            "skipped",
            at,
            OUTBOX_SKIPPED,
            "capped",
            said.reason,
            step_note={"action": "skipped", "at": at.isoformat()},
        )
    return _Outcome(
        effect,
        "deferred",
        at,
        kind="capped",
        detail=said.reason,
        capped_until=until,
        step_note={"action": "waits", "until": until.isoformat()},
    )


STEP_KEY = re.compile(r"^run-(\d+)-step-(\d+)$")


async def _note_step(session: WriteSession, outcome: _Outcome) -> None:
    """Record on the step that queued the message what the frequency cap did to it."""
    found = STEP_KEY.match(outcome.effect.idempotency_key)
    if found is None or outcome.step_note is None:
        return
    step = await session.scalar(
        select(Step).where(Step.run_id == int(found[1]), Step.seq == int(found[2]))
    )
    if step is None:
        return
    note = outcome.step_note
    step.output = {**(step.output or {}), "frequency_cap": note}
    said = "skipped" if note["action"] == "skipped" else f"waits until {note['until']}"
    step.decision = f"{step.decision}; frequency cap: {said}"[:200]


class Deliverer:
    """Leases due effects in batches and sends each batch ``deliver_in_flight`` at a time.

    Outcomes are recorded as they come in, several per transaction (see :meth:`_record`): an
    effect is marked sent only after its provider confirmed it, so a deliverer killed at any
    moment leaves each confirmed effect sent and every other one pending, due again when its
    lease expires. The one window no sender can close is a message the provider accepted before
    its confirmation was committed: it goes out again with the same Message-ID (idempotency
    key), so the receiver recognises the repeat. A send slot takes its next effect only once its
    previous outcome is committed, and the process's deliverer jobs share ``in_flight`` slots,
    so a kill repeats at most ``in_flight`` messages of the process
    (:mod:`~app.engines.funnels.outbox.recorded_slots`).
    """

    def __init__(
        self,
        db: Database,
        settings: FunnelSettings,
        senders: Callable[[str], ChannelSender | None],
        *,
        lease_seconds: int = 120,
        clock: Clock | None = None,
        in_flight: int | None = None,
        address_key: bytes | None = None,
    ) -> None:
        self.db = db
        self.address_key = address_key
        """The instance key for erased addresses' hashes: with it, an address whose contact was
        deleted while suppressed stays suppressed for a new contact with that address."""
        self.settings = settings
        self.senders = senders
        self.lease_seconds = lease_seconds
        self.clock = clock
        """With a clock, a batch's leases are renewed while it is delivered (a batch may take
        longer than one lease: 50 messages to a slow SMTP server)."""
        self.in_flight = max(1, in_flight or settings.deliver_in_flight)
        self._slots = asyncio.Semaphore(self.in_flight)
        """Shared by the process's deliverer jobs: messages sent and not yet recorded, at most."""

    async def lease(self, *, owner: str, now: datetime, limit: int) -> list[LeasedEffect]:
        rows = await DELIVERY.take(
            self.db, now=now, limit=limit, owner=owner, lease_seconds=self.lease_seconds
        )
        return [
            LeasedEffect(r[0], r[1], r[2], r[3], r[4], payloads.decode(r[3], r[5]), r[6])
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
        if not effects:
            return DeliveryResult()
        if self.clock is None:
            counts = await self._deliver_all(effects, owner, now, leased_at, None)
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
            counts = await self._deliver_all(effects, owner, now, leased_at, lease)
        return DeliveryResult(leased=len(effects), **counts)

    async def deliver(
        self,
        effect: LeasedEffect,
        *,
        owner: str,
        now: Callable[[], datetime],
        lease: Lease | None = None,
    ) -> str:
        """Deliver one leased effect on its own; returns the :class:`DeliveryResult` field."""
        counts = await self._deliver_all([effect], owner, now, now(), lease)
        return next(name for name, n in counts.items() if n)

    async def _deliver_all(
        self,
        effects: list[LeasedEffect],
        owner: str,
        now: Callable[[], datetime],
        leased_at: datetime,
        lease: Lease | None,
    ) -> dict[str, int]:
        counts = {"sent": 0, "skipped": 0, "deferred": 0, "failed": 0}
        contacts, ours, caps = await self._read(effects, owner, now())
        blocked = decisions(effects, contacts, now())
        checked_at = now()
        capped, reserved = await self._reserve(effects, contacts, ours, blocked, caps, checked_at)
        expires = leased_at + timedelta(seconds=self.lease_seconds)

        async def one(effect: LeasedEffect) -> _Outcome:
            if effect.id not in ours or (
                not lease.holds(effect.id) if lease is not None else now() >= expires
            ):
                # Cancelled (contact deleted, goal reached) after we leased it, or our lease
                # ran out: whoever holds it now delivers it.
                return _Outcome(effect, "skipped", now())
            if isinstance(effect.payload, Unreadable):
                # Sending it cannot work, now or later: failed once, with the reason.
                reason = f"unreadable payload: {effect.payload.reason}"
                return _Outcome(effect, "failed", now(), OUTBOX_FAILED, "failed", reason)
            if effect.id in capped:
                return _capped(effect, capped[effect.id], now())
            return await self._attempt(effect, blocked[effect.id], now)

        async def record(group: list[_Outcome]) -> bool:
            unsent = [
                reserved[o.effect.id]
                for o in group
                if o.effect.id in reserved and o.status != OUTBOX_SENT
            ]
            await self._record(group, owner, now(), (caps, unsent, checked_at))
            for outcome in group:
                counts[outcome.count] += 1
                if lease is not None:
                    lease.done(outcome.effect.id)
            return True

        # Each slot's outcome is committed before it takes its next effect, and the process's
        # deliverer jobs share ``in_flight`` slots: a kill leaves at most that many sent and
        # unrecorded (see recorded_slots).
        await send_and_record(
            effects, slots=self.in_flight, attempt=one, record=record, slot_gate=self._slots
        )
        return counts

    async def _read(
        self, effects: list[LeasedEffect], owner: str, at: datetime
    ) -> tuple[dict[int, Person], set[int], dict[int, frequency.Cap]]:
        """What the consent gate knows of the batch's recipients now (send-time checks, with the
        suppression remembered for their addresses), the effects still ours and the frequency
        caps of their workspaces."""
        async with self.db.read() as session:
            people = await gate.people(session, self.address_key, {e.contact_id for e in effects})
            ours = set(
                await session.scalars(
                    select(OutboxEffect.id).where(
                        OutboxEffect.id.in_([e.id for e in effects]),
                        OutboxEffect.status == OUTBOX_PENDING,
                        OutboxEffect.lease_owner == owner,
                        # An expired lease is no longer ours, even before another deliverer
                        # takes it.
                        OutboxEffect.next_attempt_at > at,
                    )
                )
            )
            caps = await frequency.caps_of(session, {e.workspace_id for e in effects})
        return people, ours, caps

    async def _reserve(
        self,
        effects: list[LeasedEffect],
        people: dict[int, Person],
        ours: set[int],
        blocked: dict[int, Decision],
        caps: dict[int, frequency.Cap],
        at: datetime,
    ) -> tuple[dict[int, datetime], dict[int, frequency.Want]]:
        """Take the frequency-cap slots of the messages the gate let through (one transaction
        for the batch). Returns the capped effects (→ the next allowed time) and the reserved
        ones."""
        asks = [
            gate.Ask(
                e.id,
                e.workspace_id,
                e.contact_id,
                message_of(e.channel, e.payload),
                people[e.contact_id],
            )
            for e in effects
            if e.workspace_id in caps
            and e.id in ours
            and isinstance(blocked[e.id], Send)
            and not isinstance(e.payload, Unreadable)
        ]
        if not asks:
            return {}, {}
        async with self.db.write() as uow:
            refused, reserved = await gate.take_slots(uow.session, caps, asks, at)
        capped = {
            ref: said.until if isinstance(said, WaitUntil) else at for ref, said in refused.items()
        }
        return capped, reserved

    async def _attempt(
        self, effect: LeasedEffect, decision: Decision, now: Callable[[], datetime]
    ) -> _Outcome:
        if isinstance(decision, Skip):
            return _Outcome(effect, "skipped", now(), OUTBOX_SKIPPED, "suppressed", decision.reason)
        if isinstance(decision, WaitUntil):
            # Quiet hours at send time: due again when they end, this try not counted.
            return _Outcome(
                effect,
                "deferred",
                now(),
                kind="held",
                detail=decision.reason,
                capped_until=decision.until,
            )
        sender = self.senders(effect.channel)
        if sender is None:
            return _Outcome(
                effect,
                "deferred",
                now(),
                detail=f"no sender for channel {effect.channel}",
                retry=True,
            )
        try:
            detail = await sender.send(effect)
        except TransientDeliveryError as exc:
            return _Outcome(
                effect,
                "deferred",
                now(),
                detail=str(exc),
                retry=True,
                retry_after=exc.retry_after,
            )
        except PermanentDeliveryError as exc:
            return _Outcome(effect, "failed", now(), OUTBOX_FAILED, "failed", str(exc))
        return _Outcome(effect, "sent", now(), OUTBOX_SENT, "sent", detail)

    async def _record(
        self,
        group: list[_Outcome],
        owner: str,
        at: datetime,
        unreserve: tuple[dict[int, frequency.Cap], list[frequency.Want], datetime],
    ) -> None:
        """Record a group of outcomes in one transaction. Each write is guarded by the lease
        (``lease_owner``) and the pending status, and only a row it changed gets its delivery
        event: an effect cancelled or taken over meanwhile is left to whoever holds it. The
        frequency-cap slots of messages that did not go out are given back in the same
        transaction."""
        sent = [o for o in group if o.status == OUTBOX_SENT]
        others = [
            o for o in group if o.status not in (None, OUTBOX_SENT) or o.retry or o.capped_until
        ]
        caps, unsent, reserved_at = unreserve
        if not sent and not others and not unsent:
            return
        async with self.db.write() as uow:
            session = uow.session
            failing = [
                o.effect.id
                for o in others
                if o.status == OUTBOX_FAILED
                or (o.retry and o.effect.attempts >= self.settings.max_send_attempts)
            ]
            if failing:
                # Their runs are locked first, in the order the runner locks (run, then its
                # effects), so moving a run cannot deadlock with a runner executing it.
                await lock_runs_of(session, failing)
            if unsent:
                await frequency.release(session, caps, unsent, reserved_at)
            recorded: list[_Outcome] = []
            if sent:
                changed = set(
                    await session.scalars(
                        update(OutboxEffect)
                        .where(
                            OutboxEffect.id.in_([o.effect.id for o in sent]),
                            OutboxEffect.lease_owner == owner,
                            OutboxEffect.status == OUTBOX_PENDING,
                        )
                        .values(
                            status=OUTBOX_SENT, finished_at=at, lease_owner=None, last_error=None
                        )
                        .returning(OutboxEffect.id)
                    )
                )
                recorded += [o for o in sent if o.effect.id in changed]
            for outcome in others:
                if outcome.retry:
                    recorded += await self._retry(session, outcome, owner)
                elif outcome.capped_until is not None:
                    recorded += await self._hold(session, outcome, owner)
                else:
                    recorded += await self._finish(session, outcome, owner)
                if outcome.step_note and recorded and recorded[-1].effect is outcome.effect:
                    await _note_step(session, outcome)
            if recorded:
                await session.execute(
                    # Core insert of the table: several rows in one statement, no ORM flush.
                    core_insert(DeliveryEvent.__table__),  # type: ignore[arg-type]
                    [
                        {
                            "workspace_id": o.effect.workspace_id,
                            "outbox_id": o.effect.id,
                            "contact_id": o.effect.contact_id,
                            "kind": o.kind,
                            "detail": o.detail[:2000],
                            "at": o.at,
                        }
                        for o in recorded
                    ],
                )

    async def _hold(self, session: WriteSession, outcome: _Outcome, owner: str) -> list[_Outcome]:
        """A capped message that waits: due again when the cap allows, this try not counted."""
        result = await session.execute(
            update(OutboxEffect)
            .where(
                OutboxEffect.id == outcome.effect.id,
                OutboxEffect.lease_owner == owner,
                OutboxEffect.status == OUTBOX_PENDING,
            )
            .values(
                next_attempt_at=outcome.capped_until,
                lease_owner=None,
                attempts=OutboxEffect.attempts - 1,
                last_error=outcome.detail[:2000],
            )
        )
        return [outcome] if row_count(result) else []

    async def _retry(self, session: WriteSession, outcome: _Outcome, owner: str) -> list[_Outcome]:
        effect, error = outcome.effect, outcome.detail
        if effect.attempts >= self.settings.max_send_attempts:
            gave_up = _Outcome(
                effect, "failed", outcome.at, OUTBOX_FAILED, "failed", f"gave up: {error}"
            )
            return await self._finish(session, gave_up, owner)
        delay = max(
            self.settings.retry_base_seconds * 2 ** (effect.attempts - 1), outcome.retry_after or 0
        )
        retry_at = outcome.at + timedelta(seconds=min(delay, 6 * 3600))
        await session.execute(
            update(OutboxEffect)
            .where(OutboxEffect.id == effect.id, OutboxEffect.lease_owner == owner)
            .values(next_attempt_at=retry_at, lease_owner=None, last_error=error[:2000])
        )
        detail = f"{error} (retry at {retry_at.isoformat()})"
        return [_Outcome(effect, "deferred", outcome.at, kind="deferred", detail=detail)]

    async def _finish(self, session: WriteSession, outcome: _Outcome, owner: str) -> list[_Outcome]:
        """Record a final status; a message that failed for good moves its run in the same
        transaction (it never stays ``completed``: :mod:`~app.engines.funnels.runs.work.effect_failures`)."""
        result = await session.execute(
            update(OutboxEffect)
            .where(
                OutboxEffect.id == outcome.effect.id,
                OutboxEffect.lease_owner == owner,
                OutboxEffect.status == OUTBOX_PENDING,
            )
            .values(
                status=outcome.status,
                finished_at=outcome.at,
                lease_owner=None,
                last_error=outcome.detail[:2000],
            )
        )
        if not row_count(result):
            return []
        if outcome.status == OUTBOX_FAILED:
            await after_failed_send(
                session,
                outbox_id=outcome.effect.id,
                channel=outcome.effect.channel,
                error=outcome.detail,
                now=outcome.at,
            )
        return [outcome]


SenderLookup = Callable[[str], ChannelSender | None]
Flush = Callable[[], Awaitable[None]]
