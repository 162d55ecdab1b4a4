"""Persistent SMTP connections shared by concurrent senders.

A sender of thousands of messages that opens one conversation per message spends most of its
time on TCP, EHLO and (with STARTTLS) TLS handshakes. :class:`SmtpPool` keeps up to ``size``
connections open and hands each ``send`` an idle one, so ``size`` messages can be on the wire at
once. Failures are classified like :class:`~app.integrations.mail.sender.MailSender`'s.

A connection that sat idle may have been closed by the server (servers drop idle clients after a
minute or so); it is checked with ``NOOP`` before being used again, and replaced when the check
fails — before any message is on it, so the check can never resend anything.
"""

from __future__ import annotations

import asyncio

import aiosmtplib

from app.clock import Clock, SystemClock
from app.integrations.http_guard.classify import is_transient_smtp_reply
from app.integrations.mail.errors import PermanentMailError, TransientMailError
from app.integrations.mail.message import OutgoingEmail
from app.integrations.mail.tracing import smtp_span
from app.integrations.mail.wire import transmit
from app.scheduling.outside_calls import check_outside_call
from app.settings import MailSettings

IDLE_CHECK_SECONDS = 5.0
"""A connection unused for longer than this is checked with NOOP before it carries a message."""


class _Connection:
    __slots__ = ("client", "used_at")

    def __init__(self, client: aiosmtplib.SMTP, used_at: float) -> None:
        self.client = client
        self.used_at = used_at


class SmtpPool:
    """Up to ``size`` persistent connections to the configured SMTP server."""

    def __init__(self, settings: MailSettings, size: int, clock: Clock | None = None) -> None:
        self._settings = settings
        self._clock: Clock = clock or SystemClock()
        self._size = max(1, size)
        self._idle: asyncio.LifoQueue[_Connection] = asyncio.LifoQueue()
        self._made = 0

    @property
    def from_address(self) -> str:
        return self._settings.from_address

    @property
    def size(self) -> int:
        return self._size

    def _new(self) -> _Connection:
        s = self._settings
        return _Connection(
            aiosmtplib.SMTP(
                hostname=s.smtp_host,
                port=s.smtp_port,
                timeout=s.timeout_seconds,
                start_tls=s.smtp_starttls,
                username=s.smtp_username or None,
                password=s.smtp_password or None,
            ),
            self._clock.monotonic(),
        )

    async def _take(self) -> _Connection:
        if self._idle.empty() and self._made < self._size:
            self._made += 1
            return self._new()
        return await self._idle.get()

    async def _ready(self, conn: _Connection) -> None:
        """Connect ``conn`` or make sure its idle connection still answers."""
        client = conn.client
        if client.is_connected and self._clock.monotonic() - conn.used_at > IDLE_CHECK_SECONDS:
            try:
                await client.noop()
            except (aiosmtplib.SMTPException, OSError, TimeoutError):
                client.close()
        if not client.is_connected:
            await client.connect()

    async def send(self, email: OutgoingEmail) -> None:
        """Deliver ``email`` (see :meth:`_send`), in a span when tracing is on."""
        with smtp_span(self._settings, email):
            await self._send(email)

    async def _send(self, email: OutgoingEmail) -> None:
        """Deliver ``email`` over a pooled connection.

        Raises:
            TransientMailError: 4xx reply, timeout or connection failure (retry later).
            PermanentMailError: 5xx reply (do not retry).
        """
        if not email.to:
            raise PermanentMailError("message has no recipients")
        check_outside_call()
        conn = await self._take()
        healthy = True
        try:
            await self._ready(conn)
            await transmit(conn.client, email, sender=self.from_address)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            # Every recipient refused: the worst reply decides; the connection stays usable.
            codes = [r.code for r in exc.recipients] or [550]
            worst = max(codes)
            error = TransientMailError if is_transient_smtp_reply(worst) else PermanentMailError
            raise error(str(exc), code=worst) from exc
        except aiosmtplib.SMTPResponseException as exc:
            if not is_transient_smtp_reply(exc.code):
                raise PermanentMailError(f"SMTP {exc.code}: {exc.message}", code=exc.code) from exc
            # A 4xx may be the server shedding load before it hangs up: start afresh next time.
            healthy = False
            raise TransientMailError(f"SMTP {exc.code}: {exc.message}", code=exc.code) from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            healthy = False
            raise TransientMailError(f"SMTP connection failed: {exc}") from exc
        except BaseException:
            # Cancelled mid-conversation: the connection is in an unknown state.
            healthy = False
            raise
        finally:
            if not healthy:
                conn.client.close()
            conn.used_at = self._clock.monotonic()
            self._idle.put_nowait(conn)

    async def aclose(self) -> None:
        """Say QUIT on every idle connection (the pool can still be used afterwards)."""
        while not self._idle.empty():
            conn = self._idle.get_nowait()
            self._made -= 1
            if conn.client.is_connected:
                try:
                    await conn.client.quit()
                except (aiosmtplib.SMTPException, OSError, TimeoutError):
                    conn.client.close()
