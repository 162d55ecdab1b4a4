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
from collections.abc import Iterator
from contextlib import contextmanager

import aiosmtplib

from app.clock import Clock, SystemClock
from app.integrations.http_guard.classify import is_transient_smtp_reply
from app.integrations.mail.errors import PermanentMailError, TransientMailError
from app.integrations.mail.message import OutgoingEmail
from app.integrations.mail.tracing import smtp_span
from app.integrations.mail.wire import Withheld, withhold
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
        """Deliver ``email`` over a pooled connection.

        Raises:
            TransientMailError: 4xx reply, timeout or connection failure (retry later).
            PermanentMailError: 5xx reply (do not retry).
        """
        await (await self.prepare(email)).complete()

    async def prepare(self, email: OutgoingEmail) -> PreparedSend:
        """Put ``email`` on the wire over a pooled connection, without the line that makes the
        server deliver it (see :class:`~app.integrations.mail.wire.Withheld`): the returned
        send holds the connection until it is completed or aborted. Raises what :meth:`send`
        raises, with nothing delivered."""
        if not email.to:
            raise PermanentMailError("message has no recipients")
        check_outside_call()
        conn = await self._take()
        with smtp_span(self._settings, email), self._using(conn, keep=True):
            await self._ready(conn)
            withheld = await withhold(conn.client, email, sender=self.from_address)
        return PreparedSend(self, conn, withheld, email)

    async def _complete(self, conn: _Connection, withheld: Withheld, email: OutgoingEmail) -> None:
        with smtp_span(self._settings, email, "smtp end of data"), self._using(conn, keep=False):
            await withheld.complete()

    def _abort(self, conn: _Connection, withheld: Withheld) -> None:
        withheld.abort()
        self._give_back(conn)

    def _give_back(self, conn: _Connection) -> None:
        conn.used_at = self._clock.monotonic()
        self._idle.put_nowait(conn)

    @contextmanager
    def _using(self, conn: _Connection, *, keep: bool) -> Iterator[None]:
        """Sort a failure on ``conn`` into :class:`TransientMailError` /
        :class:`PermanentMailError`, closing the connection when its state is unknown, and give
        it back to the pool when the conversation ends here (a failure, or ``keep`` False)."""
        healthy = True
        ended = True  # the conversation ends here: the connection goes back to the pool
        try:
            yield
            ended = not keep
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
            if ended:
                self._give_back(conn)

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


class PreparedSend:
    """A message on the wire, not yet delivered (:meth:`SmtpPool.prepare`); it holds its
    connection until :meth:`complete` or :meth:`abort`, one of which must be called."""

    __slots__ = ("_conn", "_email", "_pool", "_withheld")

    def __init__(
        self, pool: SmtpPool, conn: _Connection, withheld: Withheld, email: OutgoingEmail
    ) -> None:
        self._pool = pool
        self._conn = conn
        self._withheld = withheld
        self._email = email

    async def complete(self) -> None:
        """Deliver the message (raises what :meth:`SmtpPool.send` raises)."""
        await self._pool._complete(self._conn, self._withheld, self._email)

    def abort(self) -> None:
        """Give the message up, nothing delivered (its connection is closed)."""
        self._pool._abort(self._conn, self._withheld)
