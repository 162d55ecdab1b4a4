"""SMTP delivery through aiosmtplib, with failures classified for the caller's retry policy."""

from __future__ import annotations

import aiosmtplib

from app.integrations.http_guard.classify import is_transient_smtp_reply
from app.integrations.mail.errors import PermanentMailError, TransientMailError
from app.integrations.mail.message import OutgoingEmail
from app.integrations.mail.tracing import smtp_span
from app.integrations.mail.wire import transmit
from app.scheduling.outside_calls import check_outside_call
from app.settings import MailSettings


def _classify(code: int, text: str) -> TransientMailError | PermanentMailError:
    if is_transient_smtp_reply(code):
        return TransientMailError(f"SMTP {code}: {text}", code=code)
    return PermanentMailError(f"SMTP {code}: {text}", code=code)


class MailSender:
    """Sends :class:`OutgoingEmail` to the configured SMTP server, one conversation per message."""

    def __init__(self, settings: MailSettings) -> None:
        self._settings = settings

    @property
    def from_address(self) -> str:
        return self._settings.from_address

    async def send(self, email: OutgoingEmail) -> None:
        """Deliver ``email`` (see :meth:`_send`), in a span when tracing is on."""
        with smtp_span(self._settings, email):
            await self._send(email)

    async def _send(self, email: OutgoingEmail) -> None:
        """Deliver ``email``.

        Raises:
            TransientMailError: 4xx reply, timeout or connection failure (retry later).
            PermanentMailError: 5xx reply (do not retry).
        """
        if not email.to:
            raise PermanentMailError("message has no recipients")
        check_outside_call()
        s = self._settings
        client = aiosmtplib.SMTP(
            hostname=s.smtp_host,
            port=s.smtp_port,
            username=s.smtp_username or None,
            password=s.smtp_password or None,
            start_tls=s.smtp_starttls,
            timeout=s.timeout_seconds,
        )
        try:
            async with client:
                await transmit(client, email, sender=s.from_address)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            # Every recipient refused: the worst reply decides (any 5xx makes it permanent).
            codes = [r.code for r in exc.recipients] or [550]
            worst = max(codes)
            raise _classify(worst, str(exc)) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise _classify(exc.code, exc.message) from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            # Connection refused/dropped, timeouts, TLS negotiation: nothing was accepted.
            raise TransientMailError(f"SMTP connection failed: {exc}") from exc
