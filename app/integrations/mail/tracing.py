"""A span for every SMTP send, when tracing is on (:mod:`app.telemetry`): the server and the
number of recipients, never their addresses. A send prepared ahead of its delivery
(:meth:`~app.integrations.mail.pool.SmtpPool.prepare`) has a second one for its end of data."""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry.trace import Span, SpanKind

from app import telemetry
from app.integrations.mail.message import OutgoingEmail
from app.settings import MailSettings


def smtp_span(
    settings: MailSettings, email: OutgoingEmail, name: str = "smtp send"
) -> AbstractContextManager[Span | None]:
    return telemetry.span(
        name,
        kind=SpanKind.CLIENT,
        attributes=lambda: {
            "network.protocol.name": "smtp",
            "server.address": settings.smtp_host,
            "server.port": settings.smtp_port,
            "sweepline.provider": "smtp",
            "sweepline.mail.recipients": len(email.to),
        },
    )
