"""The campaign sender: resumable, rate-limited, suppression checked at send time (FN-28, FN-30).

One sender holds a campaign's lease at a time (:mod:`..claim.lease`, renewed with every commit; a
sender that lost it stops). It walks the recipients in ``seq`` order, ``in_flight`` messages at a
time over persistent SMTP connections, and after each group commits the group's outcomes and
moves the checkpoint (:mod:`..records.outcomes`) — **on confirmed sends, never on fetch**. A
sender killed at any moment therefore leaves every confirmed recipient marked sent (never sent
again) and every other one pending (sent by the next sender): nobody is skipped, and nobody
confirmed is sent twice.

The one window no SMTP client can close (RFC 1047): a server that accepted a message whose "250"
the sender never got to record. Such a message is sent again with the same ``Message-ID``
(``<c{campaign}.r{seq}.w{workspace}@domain>``), so receivers recognise the repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.clock import Clock
from app.db.session import Database
from app.engines.funnels.campaigns.claim import lease
from app.engines.funnels.campaigns.due.recipients import RecipientRow, next_pending
from app.engines.funnels.campaigns.models import (
    R_FAILED,
    R_PENDING,
    R_SENT,
    R_SKIPPED,
    Campaign,
)
from app.engines.funnels.campaigns.records import outcomes
from app.engines.funnels.campaigns.work.compose import blocked, compose, message_of
from app.engines.funnels.campaigns.work.transport import (
    Permanent,
    Prepared,
    Transient,
    Transport,
)
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import Send
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.outbox.work import frequency
from app.engines.funnels.outbox.work.recorded_slots import Done, Ready, send_and_record


@dataclass(frozen=True, slots=True)
class StepResult:
    sent: int = 0
    skipped: int = 0
    failed: int = 0
    deferred: int = 0
    done: bool = False
    lost_lease: bool = False
    next_at: datetime | None = None
    """When the rate limit allows the next step."""


def _result(totals: dict[str, int], **kw: Any) -> StepResult:
    return StepResult(
        sent=totals[R_SENT],
        skipped=totals[R_SKIPPED],
        failed=totals[R_FAILED],
        deferred=totals[R_PENDING],
        **kw,
    )


class CampaignSender:
    def __init__(
        self,
        db: Database,
        transport: Transport,
        *,
        owner: str,
        domain: str,
        in_flight: int = 8,
        lease_seconds: int = 60,
        tracking: Tracking | None = None,
        signing: Tracking | None = None,
        mailto_address: str = "",
        address_key: bytes | None = None,
    ) -> None:
        """``signing`` (the workspace's public URL and secret) signs the unsubscribe links; a
        sender without it refuses to send rather than mail without a way out. ``address_key``
        (the instance key for erased addresses' hashes) keeps an address suppressed after its
        contact was deleted."""
        self.db = db
        self.address_key = address_key
        self.signing = signing
        self.mailto_address = mailto_address
        self.transport = transport
        self.owner = owner
        self.domain = domain
        self.in_flight = max(1, in_flight)
        self.lease_seconds = lease_seconds
        self.tracking = tracking

    async def claim(self, campaign_id: int, now: datetime) -> Campaign | None:
        """Take the campaign's lease (free, expired, or already ours)."""
        return await lease.take(
            self.db, campaign_id, owner=self.owner, lease_seconds=self.lease_seconds, now=now
        )

    async def release(self, campaign_id: int) -> None:
        await lease.release(self.db, campaign_id, self.owner)

    async def confirm(
        self,
        campaign: Campaign,
        outcome: dict[int, tuple[str, str]],
        at: datetime,
        *,
        release: outcomes.Release | None = None,
    ) -> bool:
        """Commit ``outcome``, move the checkpoint and renew our lease until ``at`` plus the
        lease (see :func:`~app.engines.funnels.campaigns.records.outcomes.confirm`)."""
        return await outcomes.confirm(
            self.db,
            campaign,
            outcome,
            at,
            owner=self.owner,
            lease_seconds=self.lease_seconds,
            release=release,
        )

    async def step(
        self, campaign: Campaign, now: Any, *, stop_at: datetime | None = None
    ) -> StepResult:
        """Send up to one minute's worth of messages (the campaign's rate limit); ``now`` is a
        callable returning the current time.

        Up to ``in_flight`` messages are on the wire at once (each slot on its own, so one slow
        message does not hold the others), and outcomes are committed as they come in: each
        commit takes whatever finished since the previous one, and a slot sends its next message
        only once its previous outcome is committed. So a crash leaves at most ``in_flight``
        messages unrecorded. ``stop_at``: the step ends between two groups of rows once it has
        passed (the sender job's time slice)."""
        started = now()
        budget = campaign.rate_per_minute
        totals = {R_SENT: 0, R_SKIPPED: 0, R_FAILED: 0, R_PENDING: 0}
        while budget > 0:
            rows = await next_pending(self.db, campaign, min(budget, 256), self.address_key)
            if not rows:
                await outcomes.finish(self.db, campaign, self.owner, now())
                return _result(totals, done=True)
            if not await self._send_rows(campaign, rows, now, totals):
                return _result(totals, lost_lease=True)
            budget -= len(rows)
            if stop_at is not None and now() >= stop_at:
                # The job's time is up (a high rate makes a minute's worth a long step): hand
                # over between two groups, never by being cancelled in the middle of one.
                return _result(totals, next_at=now())
            if totals[R_PENDING]:
                # The server is deferring: give it time instead of hammering it.
                return _result(totals, next_at=now() + timedelta(seconds=60))
        return _result(totals, next_at=started + timedelta(seconds=60))

    async def _send_rows(
        self, campaign: Campaign, rows: list[RecipientRow], now: Any, totals: dict[str, int]
    ) -> bool:
        """Send ``rows`` ``in_flight`` at a time, committing outcomes as they arrive; a slot
        sends its next row only once its previous outcome is committed (see
        :mod:`~app.engines.funnels.outbox.work.recorded_slots`). False when the lease was lost."""
        checked_at = now()
        caps, capped, reserved = await self._reserve(campaign, rows, checked_at)

        async def one(row: RecipientRow) -> Ready[tuple[int, tuple[str, str]]]:
            if row.seq in capped:
                # Held back by the consent gate (its reason already recorded on the row).
                return Done((row.seq, (R_SKIPPED, capped[row.seq])))
            return await self._prepare_one(campaign, row)

        async def confirm(batch: list[tuple[int, tuple[str, str]]]) -> bool:
            for _seq, (status, _detail) in batch:
                totals[status] += 1
            unsent = [reserved[seq] for seq, (st, _) in batch if seq in reserved and st != R_SENT]
            return await self.confirm(
                campaign, dict(batch), now(), release=(caps, unsent, checked_at)
            )

        return await send_and_record(rows, slots=self.in_flight, prepare=one, record=confirm)

    async def _reserve(
        self, campaign: Campaign, rows: list[RecipientRow], at: datetime
    ) -> tuple[dict[int, frequency.Cap], dict[int, str], dict[int, frequency.Want]]:
        """Ask the consent gate about ``rows`` and take the frequency-cap slots of those it lets
        through; the recipients it holds back are marked skipped **with the reason** in the same
        transaction (guarded by our lease). Returns the workspace's caps, the skipped rows (the
        cap's included) and the reserved slots, by ``seq``."""
        async with self.db.read() as session:
            caps = await frequency.caps_of(session, [campaign.workspace_id])
        said = {row.seq: blocked(campaign, row, at) for row in rows}
        message = message_of(campaign)
        asks = [
            gate.Ask(row.seq, campaign.workspace_id, row.contact_id, message, row.person)
            for row in rows
            if isinstance(said[row.seq], Send)
        ]
        skipped = {seq: d.reason for seq, d in said.items() if not isinstance(d, Send)}
        if not skipped and not (caps and asks):
            return caps, {}, {}
        async with self.db.write() as uow:
            refused, reserved = await gate.take_slots(uow.session, caps, asks, at)
            skipped.update({seq: d.reason for seq, d in refused.items()})
            await outcomes.record_skips(uow.session, campaign, self.owner, skipped)
        # A broadcast does not wait for the contact's next day: held back is skipped.
        return caps, skipped, reserved

    async def _prepare_one(
        self, campaign: Campaign, row: RecipientRow
    ) -> Ready[tuple[int, tuple[str, str]]]:
        """Compose the message of one recipient the consent gate let through (:meth:`_reserve`)
        and put it on the wire, to be delivered when its slot may (see
        :mod:`~app.engines.funnels.outbox.work.recorded_slots`)."""
        if self.signing is None and not campaign.transactional:
            return Done((row.seq, (R_FAILED, "marketing mail needs signed unsubscribe links")))
        email = compose(
            campaign,
            row,
            domain=self.domain,
            tracking=self.tracking,
            signing=self.signing or Tracking("", ""),
            mailto_address=self.mailto_address,
        )
        try:
            prepared = await self.transport.prepare(email)
        except (Permanent, Transient) as exc:
            return Done((row.seq, _failure(exc)))
        return _Sending(row.seq, email.message_id, prepared)


def _failure(exc: Permanent | Transient) -> tuple[str, str]:
    """A refused recipient failed; a deferred one stays pending (tried again later)."""
    return (R_FAILED if isinstance(exc, Permanent) else R_PENDING), str(exc)


class _Sending:
    """One recipient's message on the wire, delivered by :meth:`complete`."""

    __slots__ = ("_message_id", "_prepared", "_seq")

    def __init__(self, seq: int, message_id: str, prepared: Prepared) -> None:
        self._seq = seq
        self._message_id = message_id
        self._prepared = prepared

    async def complete(self) -> tuple[int, tuple[str, str]]:
        try:
            await self._prepared.complete()
        except (Permanent, Transient) as exc:
            return self._seq, _failure(exc)
        return self._seq, (R_SENT, self._message_id)

    def abort(self) -> None:
        self._prepared.abort()


async def send_until_done(
    sender: CampaignSender, campaign_id: int, clock: Clock, *, max_seconds: float | None = None
) -> bool:
    """Claim the campaign and send it to the end, pausing between steps for the rate limit (on
    ``clock``). Returns True when the campaign is finished (False: not ours, lost lease, or out of
    time: ``max_seconds`` of ``clock`` have passed, and the campaign is released for the next
    sender job)."""
    campaign = await sender.claim(campaign_id, clock.now())
    if campaign is None:
        return False
    began = clock.monotonic()
    stop_at = None if max_seconds is None else clock.now() + timedelta(seconds=max_seconds)
    while True:
        result = await sender.step(campaign, clock.now, stop_at=stop_at)
        if result.done:
            return True
        if result.lost_lease:
            return False
        if max_seconds is not None and clock.monotonic() - began > max_seconds:
            await sender.release(campaign_id)
            return False
        if result.next_at is not None:
            wait = (result.next_at - clock.now()).total_seconds()
            if wait > 0:
                # Keep the lease alive across the pause.
                await sender.confirm(campaign, {}, clock.now() + timedelta(seconds=wait))
                await clock.sleep(wait)
