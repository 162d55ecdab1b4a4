"""What the campaign sender sends through: a transport that says whether a message may be tried
again (:class:`Transient`) or never (:class:`Permanent`), and the SMTP connection pool that is
one."""

from __future__ import annotations

from typing import Protocol

from app.clock import Clock
from app.integrations.mail import OutgoingEmail, PermanentMailError, TransientMailError
from app.integrations.mail.pool import SmtpPool as MailPool
from app.settings import MailSettings


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
