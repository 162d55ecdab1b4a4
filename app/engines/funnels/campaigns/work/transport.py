"""What the campaign sender sends through: a transport that says whether a message may be tried
again (:class:`Transient`) or never (:class:`Permanent`), and the SMTP connection pool that is
one. A message can be prepared — on the wire, not yet delivered — and delivered later
(:meth:`Transport.prepare`), so the sender's wait for its previous outcome's commit overlaps it."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from app.clock import Clock
from app.integrations.mail import OutgoingEmail
from app.integrations.mail.errors import mail_failures_as
from app.integrations.mail.pool import PreparedSend
from app.integrations.mail.pool import SmtpPool as MailPool
from app.settings import MailSettings


class Transient(Exception):
    """The server deferred the message or could not be reached: try again later."""


class Permanent(Exception):
    """The server refused this recipient: retrying cannot help."""


class Prepared(Protocol):
    async def complete(self) -> None:
        """Deliver the message (raises :class:`Transient` / :class:`Permanent`)."""

    def abort(self) -> None:
        """Give the message up, nothing delivered."""


class Transport(Protocol):
    async def send(self, email: OutgoingEmail) -> None: ...

    async def prepare(self, email: OutgoingEmail) -> Prepared:
        """Everything short of delivering ``email`` (raises :class:`Transient` /
        :class:`Permanent`, with nothing delivered)."""

    async def aclose(self) -> None: ...


class SmtpPool:
    """``size`` persistent SMTP connections (a campaign sends thousands of messages: one
    conversation per message would spend most of its time on handshakes), with the mail
    integration's failures sorted into this sender's :class:`Transient` / :class:`Permanent`."""

    def __init__(self, settings: MailSettings, size: int, clock: Clock | None = None) -> None:
        self._pool = MailPool(settings, size, clock)

    async def send(self, email: OutgoingEmail) -> None:
        with _sorted():
            await self._pool.send(email)

    async def prepare(self, email: OutgoingEmail) -> Prepared:
        with _sorted():
            return _Prepared(await self._pool.prepare(email))

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Prepared:
    __slots__ = ("_send",)

    def __init__(self, send: PreparedSend) -> None:
        self._send = send

    async def complete(self) -> None:
        with _sorted():
            await self._send.complete()

    def abort(self) -> None:
        self._send.abort()


def _sorted() -> AbstractContextManager[None]:
    """The mail integration's failures as this sender's retry-or-not errors."""
    return mail_failures_as(Transient, Permanent)
