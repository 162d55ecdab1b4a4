"""The campaign sender: resumable, rate-limited, suppression checked at send time (FN-28, FN-30).

One sender holds a campaign's lease at a time (``lease_owner``/``lease_until``, renewed with every
commit; a sender that lost it stops). It walks the recipients in ``seq`` order, ``in_flight``
messages at a time over persistent SMTP connections, and after each group commits the group's
outcomes and moves the checkpoint — **on confirmed sends, never on fetch**. A sender killed at any
moment therefore leaves every confirmed recipient marked sent (never sent again) and every other
one pending (sent by the next sender): nobody is skipped, and nobody confirmed is sent twice.

The one window no SMTP client can close (RFC 1047): a server that accepted a message whose "250"
the sender never got to record. Such a message is sent again with the same ``Message-ID``
(``<c{campaign}.r{seq}.w{workspace}@domain>``), so receivers recognise the repeat.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import escape
from typing import Any, Protocol

from sqlalchemy import Integer, func, select, update

from app.clock import Clock
from app.db.session import Database, WriteSession
from app.engines.funnels.campaigns.models import (
    DONE,
    R_FAILED,
    R_PENDING,
    R_SENT,
    R_SKIPPED,
    SENDING,
    Campaign,
    Recipient,
)
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import (
    GONE,
    SKIP,
    Decision,
    Outgoing,
    Person,
    Send,
    Skip,
    decide,
)
from app.engines.funnels.events.tracking import MessageRef, Tracking, track_html, track_text
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.work import frequency
from app.engines.funnels.outbox.work.recorded_slots import send_and_record
from app.engines.funnels.outbox.work.render import render
from app.engines.funnels.outbox.work.unsubscribe import (
    UnsubscribeLinks,
    UnsubscribeRef,
    links_for,
    topic_of,
    with_links,
)
from app.integrations.mail import OutgoingEmail, PermanentMailError, TransientMailError
from app.integrations.mail.pool import SmtpPool as MailPool
from app.scheduling.claim import Claim
from app.settings import MailSettings

log = logging.getLogger(__name__)


class _LeaseLost(Exception):
    """Raised inside a confirmation to roll it back: another sender holds the campaign."""


class Transient(Exception):
    """The server deferred the message or could not be reached: try again later."""


class Permanent(Exception):
    """The server refused this recipient: retrying cannot help."""


class Transport(Protocol):
    async def send(self, email: OutgoingEmail) -> None: ...

    async def aclose(self) -> None: ...


class SmtpPool:
    """``size`` persistent SMTP connections (a campaign sends thousands of messages: one
    conversation per message would spend most of its time on handshakes), with the mail
    integration's failures sorted into this sender's :class:`Transient` / :class:`Permanent`."""

    def __init__(self, settings: MailSettings, size: int, clock: Clock | None = None) -> None:
        self._pool = MailPool(settings, size, clock)

    async def send(self, email: OutgoingEmail) -> None:
        try:
            await self._pool.send(email)
        except TransientMailError as exc:
            raise Transient(str(exc)) from exc
        except PermanentMailError as exc:
            raise Permanent(str(exc)) from exc

    async def aclose(self) -> None:
        await self._pool.aclose()


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


@dataclass(frozen=True, slots=True)
class _Row:
    seq: int
    contact_id: int
    email: str | None
    first_name: str
    last_name: str
    phone: str | None
    timezone: str
    fields: dict[str, Any]
    person: Person = field(default=GONE)
    """What the consent gate knows of the recipient now."""


def _result(totals: dict[str, int], **kw: Any) -> StepResult:
    return StepResult(
        sent=totals[R_SENT],
        skipped=totals[R_SKIPPED],
        failed=totals[R_FAILED],
        deferred=totals[R_PENDING],
        **kw,
    )


def message_of(campaign: Campaign) -> Outgoing:
    """How the consent gate sees the campaign's messages: e-mail on its topic, never held for a
    later day (a capped recipient is skipped), exempt from marketing choices only when the
    campaign is marked transactional."""
    return Outgoing(
        "email",
        topic=campaign.topic,
        transactional=bool(campaign.transactional),
        when_capped=SKIP,
    )


def blocked(campaign: Campaign, row: _Row, now: datetime) -> Decision:
    """What the consent gate says of this recipient now (checked at send time, FN-30, FN-31)."""
    if row.person.exists and not row.email:
        return Skip("the contact has no e-mail address", "no_address")
    return decide(message_of(campaign), row.person, now)


def message_id(campaign: Campaign, seq: int, domain: str) -> str:
    return f"<c{campaign.id}.r{seq}.w{campaign.workspace_id}@{domain}>"


PREHEADER = '<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">{}</div>'
"""The preheader as mail clients expect it: the first, hidden text of the HTML part."""


def _with_preheader(html: str | None, preheader: str) -> str | None:
    if html is None or not preheader:
        return html
    return PREHEADER.format(escape(preheader)) + html


def row_of(contact: Contact, seq: int = 0) -> _Row:
    """A contact as the sender sees a recipient (previews and test sends)."""
    return _Row(
        seq,
        contact.id or 0,
        contact.email,
        contact.first_name or "",
        contact.last_name or "",
        contact.phone,
        contact.timezone or "UTC",
        dict(contact.fields or {}),
    )


def compose(
    campaign: Campaign,
    row: _Row,
    *,
    domain: str,
    tracking: Tracking | None,
    signing: Tracking,
    mailto_address: str = "",
    test_links: UnsubscribeLinks | None = None,
) -> OutgoingEmail:
    """The recipient's message: rendered, with its signed unsubscribe links (headers, footer,
    placeholders; none for a campaign marked transactional) and, with ``tracking``, pixel and
    links. ``test_links``: a test send (FN-77) — these links instead of the recipient's signed
    ones (a colleague who clicks them must not unsubscribe the contact whose values were
    borrowed), ``[Test]`` before the subject and a Message-ID no report parser recognises."""
    values: dict[str, Any] = dict(row.fields or {})
    values.update(
        email=row.email or "",
        phone=row.phone or "",
        first_name=row.first_name,
        last_name=row.last_name,
        timezone=row.timezone,
    )
    ref = MessageRef(campaign.workspace_id, row.contact_id, campaign.id, row.seq)
    text = render(campaign.body, values)
    html = render(campaign.html, values) if campaign.html else None
    html = _with_preheader(html, render(campaign.preheader or "", values))
    headers = {"X-Sweepline-Campaign": str(campaign.id)}
    if test_links is not None:
        text, html, _ = with_links(text, html, test_links)
        headers.update({"X-Sweepline-Test": "1", **test_links.headers()})
    elif not campaign.transactional:
        links = links_for(
            signing.base_url,
            signing.secret,
            UnsubscribeRef(ref, topic_of(campaign.topic)),
            mailto_address=mailto_address,
        )
        text, html, _ = with_links(text, html, links)
        headers.update(links.headers())
    if tracking is not None and test_links is None:
        # Links of the text part are tracked as the HTML part's are (text-only mail clients).
        text = track_text(text, tracking, ref)
        if html is not None:
            html = track_html(html, tracking, ref)
    subject = render(campaign.subject, values)
    if test_links is not None:
        subject = f"[Test] {subject}"
        mid = f"<test-{secrets.token_hex(8)}.c{campaign.id}.w{campaign.workspace_id}@{domain}>"
    else:
        mid = message_id(campaign, row.seq, domain)
    return OutgoingEmail(
        to=[row.email or ""],
        subject=subject,
        text=text,
        html=html,
        message_id=mid,
        headers=headers,
    )


async def _record_skips(
    session: WriteSession, campaign: Campaign, owner: str, skipped: dict[int, str]
) -> None:
    """Mark the recipients the consent gate held back skipped, each with its reason, while
    ``owner`` holds the campaign (a sender that lost it writes nothing)."""
    ours = (
        select(Campaign.id)
        .where(Campaign.id == campaign.id, Campaign.lease_owner == owner)
        .exists()
    )
    by_reason: dict[str, list[int]] = {}
    for seq, reason in skipped.items():
        by_reason.setdefault(reason[:2000], []).append(seq)
    for reason, seqs in by_reason.items():
        await session.execute(
            update(Recipient)
            .where(
                Recipient.campaign_id == campaign.id,
                Recipient.seq.in_(seqs),
                Recipient.status == R_PENDING,
                ours,
            )
            .values(status=R_SKIPPED, detail=reason)
        )


CAMPAIGN = Claim(
    table=Campaign.__table__,  # type: ignore[arg-type]
    due=(
        f"id = :campaign_id AND status = '{SENDING}'"
        " AND (lease_owner IS NULL OR lease_owner = :owner OR lease_until < :now)"
    ),
    order_by="id",
    returning=("id",),
    owner="lease_owner",
    expires="lease_until",
    params={"campaign_id": Integer()},
)
"""One campaign's sending lease: one sender at a time; its checkpoint renews it (see ``step``)."""


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
        async with self.db.write() as uow:
            claimed = await CAMPAIGN.take_in(
                uow.session,
                now=now,
                limit=1,
                owner=self.owner,
                lease_seconds=self.lease_seconds,
                campaign_id=campaign_id,
            )
            if not claimed:
                return None
            return await uow.session.get(Campaign, campaign_id)

    async def release(self, campaign_id: int) -> None:
        async with self.db.write() as uow:
            await uow.session.execute(
                update(Campaign)
                .where(Campaign.id == campaign_id, Campaign.lease_owner == self.owner)
                .values(lease_owner=None, lease_until=None)
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
            rows = await self._fetch(campaign, min(budget, 256))
            if not rows:
                await self._finish(campaign, now())
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
        self, campaign: Campaign, rows: list[_Row], now: Any, totals: dict[str, int]
    ) -> bool:
        """Send ``rows`` ``in_flight`` at a time, committing outcomes as they arrive; a slot
        sends its next row only once its previous outcome is committed (see
        :mod:`~app.engines.funnels.outbox.work.recorded_slots`). False when the lease was lost."""
        checked_at = now()
        caps, capped, reserved = await self._reserve(campaign, rows, checked_at)

        async def one(row: _Row) -> tuple[int, tuple[str, str]]:
            if row.seq in capped:
                # Held back by the consent gate (its reason already recorded on the row).
                return row.seq, (R_SKIPPED, capped[row.seq])
            return row.seq, await self._send_one(campaign, row)

        async def confirm(batch: list[tuple[int, tuple[str, str]]]) -> bool:
            for _seq, (status, _detail) in batch:
                totals[status] += 1
            unsent = [reserved[seq] for seq, (st, _) in batch if seq in reserved and st != R_SENT]
            return await self._confirm(
                campaign, dict(batch), now(), release=(caps, unsent, checked_at)
            )

        return await send_and_record(rows, slots=self.in_flight, attempt=one, record=confirm)

    async def _reserve(
        self, campaign: Campaign, rows: list[_Row], at: datetime
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
            await _record_skips(uow.session, campaign, self.owner, skipped)
        # A broadcast does not wait for the contact's next day: held back is skipped.
        return caps, skipped, reserved

    async def _send_one(self, campaign: Campaign, row: _Row) -> tuple[str, str]:
        """Send one recipient the consent gate let through (:meth:`_reserve`)."""
        if self.signing is None and not campaign.transactional:
            return R_FAILED, "marketing mail needs signed unsubscribe links"
        email = compose(
            campaign,
            row,
            domain=self.domain,
            tracking=self.tracking,
            signing=self.signing or Tracking("", ""),
            mailto_address=self.mailto_address,
        )
        try:
            await self.transport.send(email)
        except Permanent as exc:
            return R_FAILED, str(exc)
        except Transient as exc:
            return R_PENDING, str(exc)
        return R_SENT, email.message_id

    async def _fetch(self, campaign: Campaign, limit: int) -> list[_Row]:
        """The next pending recipients, with what the consent gate knows of each (one query for
        the rows, the gate's for the batch)."""
        async with self.db.read() as session:
            result = await session.execute(
                select(
                    Recipient.seq,
                    Recipient.contact_id,
                    Contact.email,
                    Contact.first_name,
                    Contact.last_name,
                    Contact.phone,
                    Contact.timezone,
                    Contact.fields,
                )
                .join(Contact, Contact.id == Recipient.contact_id)
                .where(
                    Recipient.campaign_id == campaign.id,
                    Recipient.status == R_PENDING,
                    Recipient.seq > campaign.checkpoint,
                    # A campaign cancelled while sending has nobody left to send to.
                    select(Campaign.id)
                    .where(Campaign.id == campaign.id, Campaign.status == SENDING)
                    .exists(),
                )
                .order_by(Recipient.seq)
                .limit(limit)
            )
            found = result.all()
            people = await gate.people(session, self.address_key, {r[1] for r in found})
        return [
            _Row(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] or {}, people[r[1]]) for r in found
        ]

    async def _confirm(
        self,
        campaign: Campaign,
        outcome: dict[int, tuple[str, str]],
        at: datetime,
        *,
        release: tuple[dict[int, frequency.Cap], list[frequency.Want], datetime] | None = None,
    ) -> bool:
        """Commit outcomes, renew the lease and move the checkpoint past every settled
        recipient, in one transaction. False when the lease was lost (another sender took
        over): then nothing is written; or when the campaign was cancelled meanwhile: then the
        outcomes are written (those messages went out) and the sender stops."""
        try:
            async with self.db.write() as uow:
                session = uow.session
                if release is not None and release[1]:
                    # Frequency-cap slots of messages that did not go out are given back.
                    await frequency.release(session, *release)
                for status in (R_SENT, R_SKIPPED, R_FAILED):
                    seqs = [seq for seq, (st, _) in outcome.items() if st == status]
                    if seqs:
                        await session.execute(
                            update(Recipient)
                            .where(
                                Recipient.campaign_id == campaign.id,
                                Recipient.seq.in_(seqs),
                                Recipient.status == R_PENDING,
                            )
                            .values(status=status, sent_at=at if status == R_SENT else None)
                        )
                first_pending = (
                    select(func.min(Recipient.seq) - 1)
                    .where(Recipient.campaign_id == campaign.id, Recipient.status == R_PENDING)
                    .scalar_subquery()
                )
                renewed = (
                    await session.execute(
                        update(Campaign)
                        .where(Campaign.id == campaign.id, Campaign.lease_owner == self.owner)
                        .values(
                            checkpoint=func.coalesce(first_pending, Campaign.audience_size),
                            lease_until=at + timedelta(seconds=self.lease_seconds),
                            updated_at=at,
                        )
                        .returning(Campaign.checkpoint, Campaign.status)
                    )
                ).first()
                if renewed is None:
                    raise _LeaseLost
        except _LeaseLost:
            return False
        campaign.checkpoint = int(renewed[0])
        return renewed[1] == SENDING

    async def _finish(self, campaign: Campaign, at: datetime) -> None:
        async with self.db.write() as uow:
            await uow.session.execute(
                update(Campaign)
                .where(
                    Campaign.id == campaign.id,
                    Campaign.lease_owner == self.owner,
                    Campaign.status == SENDING,
                )
                .values(
                    status=DONE,
                    finished_at=at,
                    checkpoint=campaign.audience_size,
                    lease_owner=None,
                    lease_until=None,
                    updated_at=at,
                )
            )


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
                await sender._confirm(campaign, {}, clock.now() + timedelta(seconds=wait))
                await clock.sleep(wait)
