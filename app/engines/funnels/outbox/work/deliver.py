"""The deliverer: sends committed outbox effects, after commit, each with its idempotency key.

It leases pending effects in batches (``claim/lease.py``). **At send time** it asks the consent
gate (:mod:`app.engines.funnels.consent`) about every effect of the batch, on every channel: a
deleted contact, a bounce or complaint, an unsubscribe (all, the topic, the channel), consent
withdrawn, an erased address's kept suppression → skipped with the reason, not sent (hard case 2:
checking at enqueue time would mail people who left during a wait); quiet hours or the frequency
cap → held until the time the gate names. Transient failures are retried with exponential backoff
(``due/retry.py``); permanent ones are recorded, and the run of a message that failed for good
takes its failure branch or ends ``failed`` (never ``completed``). Every outcome is a delivery
event (``records/outcomes.py``).

Channels plug in by name: the deliverer asks its ``senders`` for the sender of an effect's channel;
the engine's table of channels (``email``, in ``work/email.py``, and the outside ones) is built by
the plugin (:data:`app.engines.funnels.plugin.CHANNELS`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from app.db.session import Database
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.gate import message_of
from app.engines.funnels.consent.policy import Decision, Person, Send, Skip, WaitUntil
from app.engines.funnels.models import OUTBOX_FAILED, OUTBOX_SENT, OUTBOX_SKIPPED
from app.engines.funnels.outbox.channel import (
    ChannelSender,
    LeasedEffect,
    PermanentDeliveryError,
    PreparingSender,
    TransientDeliveryError,
)
from app.engines.funnels.outbox.claim import lease as leasing
from app.engines.funnels.outbox.claim.lease import DELIVERY
from app.engines.funnels.outbox.payloads import Unreadable
from app.engines.funnels.outbox.records.outcomes import record as record_outcomes
from app.engines.funnels.outbox.work import frequency
from app.engines.funnels.outbox.work.outcomes import DeliveryResult, Outcome, capped, decisions
from app.engines.funnels.outbox.work.recorded_slots import Done, Ready, send_and_record
from app.scheduling.claim import Lease
from app.settings import FunnelSettings

if TYPE_CHECKING:
    from app.clock import Clock

log = logging.getLogger(__name__)


class Deliverer:
    """Leases due effects in batches and sends each batch ``deliver_in_flight`` at a time.

    Outcomes are recorded as they come in, several per transaction
    (:mod:`~app.engines.funnels.outbox.records.outcomes`): an effect is marked sent only after
    its provider confirmed it, so a deliverer killed at any moment leaves each confirmed effect
    sent and every other one pending, due again when its lease expires. The one window no sender can close is a message the provider accepted before
    its confirmation was committed: it goes out again with the same Message-ID (idempotency
    key), so the receiver recognises the repeat. A send slot takes its next effect only once its
    previous outcome is committed, and the process's deliverer jobs share ``in_flight`` slots,
    so a kill repeats at most ``in_flight`` messages of the process
    (:mod:`~app.engines.funnels.outbox.work.recorded_slots`).
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
        return await leasing.lease(
            self.db, owner=owner, now=now, limit=limit, lease_seconds=self.lease_seconds
        )

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
        held, reserved = await self._reserve(effects, contacts, ours, blocked, caps, checked_at)
        expires = leased_at + timedelta(seconds=self.lease_seconds)

        def gone(effect: LeasedEffect) -> bool:
            """Cancelled (contact deleted, goal reached) after we leased it, or our lease ran
            out: whoever holds it now delivers it."""
            return effect.id not in ours or (
                not lease.holds(effect.id) if lease is not None else now() >= expires
            )

        async def one(effect: LeasedEffect) -> Ready[Outcome]:
            if gone(effect):
                return Done(Outcome(effect, "skipped", now()))
            if isinstance(effect.payload, Unreadable):
                # Sending it cannot work, now or later: failed once, with the reason.
                reason = f"unreadable payload: {effect.payload.reason}"
                return Done(Outcome(effect, "failed", now(), OUTBOX_FAILED, "failed", reason))
            if effect.id in held:
                return Done(capped(effect, held[effect.id], now()))
            return await self._prepare(effect, blocked[effect.id], now, gone)

        async def record(group: list[Outcome]) -> bool:
            unsent = [
                reserved[o.effect.id]
                for o in group
                if o.effect.id in reserved and o.status != OUTBOX_SENT
            ]
            await record_outcomes(
                self.db, self.settings, group, owner, now(), (caps, unsent, checked_at)
            )
            for outcome in group:
                counts[outcome.count] += 1
                if lease is not None:
                    lease.done(outcome.effect.id)
            return True

        # Each slot's outcome is committed before it delivers its next effect, and the process's
        # deliverer jobs share ``in_flight`` slots: a kill leaves at most that many sent and
        # unrecorded (see recorded_slots).
        await send_and_record(
            effects, slots=self.in_flight, prepare=one, record=record, slot_gate=self._slots
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
            ours = await leasing.still_ours(session, effects, owner, at)
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
        until = {
            ref: said.until if isinstance(said, WaitUntil) else at for ref, said in refused.items()
        }
        return until, reserved

    async def _prepare(
        self,
        effect: LeasedEffect,
        decision: Decision,
        now: Callable[[], datetime],
        gone: Callable[[LeasedEffect], bool],
    ) -> Ready[Outcome]:
        """The effect's attempt, made ready: an outcome known without sending, or its message
        prepared (as far as its channel can go without delivering it; ``gone`` is asked again
        just before it is delivered)."""
        if isinstance(decision, Skip):
            return Done(
                Outcome(effect, "skipped", now(), OUTBOX_SKIPPED, "suppressed", decision.reason)
            )
        if isinstance(decision, WaitUntil):
            # Quiet hours at send time: due again when they end, this try not counted.
            return Done(
                Outcome(
                    effect,
                    "deferred",
                    now(),
                    kind="held",
                    detail=decision.reason,
                    capped_until=decision.until,
                )
            )
        sender = self.senders(effect.channel)
        if sender is None:
            return Done(
                Outcome(
                    effect,
                    "deferred",
                    now(),
                    detail=f"no sender for channel {effect.channel}",
                    retry=True,
                )
            )
        if not isinstance(sender, PreparingSender):
            return _Delivery(effect, now, gone, lambda: sender.send(effect), None)
        try:
            prepared = await sender.prepare(effect)
        except (TransientDeliveryError, PermanentDeliveryError) as exc:
            return Done(_not_sent(effect, now(), exc))
        return _Delivery(effect, now, gone, prepared.complete, prepared.abort)


class _Delivery:
    """An effect's message, delivered by :meth:`complete` (the outcome) or given up."""

    __slots__ = ("_abort", "_deliver", "_effect", "_gone", "_now")

    def __init__(
        self,
        effect: LeasedEffect,
        now: Callable[[], datetime],
        gone: Callable[[LeasedEffect], bool],
        deliver: Callable[[], Awaitable[str]],
        abort: Callable[[], None] | None,
    ) -> None:
        self._effect = effect
        self._now = now
        self._gone = gone
        self._deliver = deliver
        self._abort = abort

    async def complete(self) -> Outcome:
        if self._gone(self._effect):
            # The lease ran out while the slot waited for its previous commit.
            self.abort()
            return Outcome(self._effect, "skipped", self._now())
        try:
            detail = await self._deliver()
        except (TransientDeliveryError, PermanentDeliveryError) as exc:
            return _not_sent(self._effect, self._now(), exc)
        return Outcome(self._effect, "sent", self._now(), OUTBOX_SENT, "sent", detail)

    def abort(self) -> None:
        if self._abort is not None:
            self._abort()


def _not_sent(
    effect: LeasedEffect, at: datetime, exc: TransientDeliveryError | PermanentDeliveryError
) -> Outcome:
    """A deferred message is tried again (not sooner than the provider asked); a refused one
    failed."""
    if isinstance(exc, TransientDeliveryError):
        return Outcome(
            effect, "deferred", at, detail=str(exc), retry=True, retry_after=exc.retry_after
        )
    return Outcome(effect, "failed", at, OUTBOX_FAILED, "failed", str(exc))
