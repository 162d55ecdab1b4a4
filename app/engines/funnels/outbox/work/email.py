"""The ``email`` channel: an effect's message composed at send time (unsubscribe links, tracked
links and pixel) and handed to the SMTP server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Protocol

from app.engines.funnels.events.tracking import (
    MessageRef,
    Tracking,
    tracked_parts,
)
from app.engines.funnels.outbox.channel import (
    LeasedEffect,
    PermanentDeliveryError,
    PreparedDelivery,
    TransientDeliveryError,
)
from app.engines.funnels.outbox.payloads import Email
from app.engines.funnels.outbox.work.unsubscribe import (
    UnsubscribeLinks,
    UnsubscribeRef,
    links_for,
    topic_of,
    with_links,
)
from app.integrations.mail import (
    OutgoingEmail,
    SmtpPool,
)
from app.integrations.mail.errors import mail_failures_as
from app.integrations.mail.pool import PreparedSend


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
    creative has none (see :mod:`app.engines.funnels.outbox.work.unsubscribe`). ``signing`` gives the
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
        return tracked_parts(text, html, tracking, self._ref(effect))

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
        with _sorted():
            await self.sender.send(email)
        return email.message_id

    async def prepare(self, effect: LeasedEffect) -> PreparedDelivery:
        """Compose the message and, over persistent connections, put it on the wire to be
        delivered by the returned object's ``complete`` (see
        :meth:`~app.integrations.mail.SmtpPool.prepare`); one conversation per message is
        held until then instead."""
        email = await self.compose(effect)
        if not isinstance(self.sender, SmtpPool):
            return _SendLater(self.sender, email)
        with _sorted():
            return _Prepared(await self.sender.prepare(email), email.message_id)


class _Prepared:
    __slots__ = ("_message_id", "_send")

    def __init__(self, send: PreparedSend, message_id: str) -> None:
        self._send = send
        self._message_id = message_id

    async def complete(self) -> str:
        with _sorted():
            await self._send.complete()
        return self._message_id

    def abort(self) -> None:
        self._send.abort()


class _SendLater:
    __slots__ = ("_email", "_sender")

    def __init__(self, sender: MailTransport, email: OutgoingEmail) -> None:
        self._sender = sender
        self._email = email

    async def complete(self) -> str:
        with _sorted():
            await self._sender.send(self._email)
        return self._email.message_id

    def abort(self) -> None:
        pass


def _sorted() -> AbstractContextManager[None]:
    """The mail integration's failures as the deliverer's retry-or-not errors."""
    return mail_failures_as(TransientDeliveryError, PermanentDeliveryError)
