"""Outgoing e-mail over SMTP.

``MailSender(settings.mail).send(OutgoingEmail(...))`` delivers one message; ``SmtpPool`` keeps
persistent connections for senders of many. Failures are sorted into
:class:`TransientMailError` (worth retrying: 4xx replies, timeouts, refused connections) and
:class:`PermanentMailError` (5xx replies: retrying cannot help). Both write the message's
bytes through :func:`app.integrations.mail.wire.transmit`, where structured headers are kept
plain ASCII (never RFC 2047-encoded).
"""

from app.integrations.mail.errors import MailError, PermanentMailError, TransientMailError
from app.integrations.mail.message import InlineImage, OutgoingEmail, build_message
from app.integrations.mail.pool import SmtpPool
from app.integrations.mail.sender import MailSender

__all__ = [
    "InlineImage",
    "MailError",
    "MailSender",
    "OutgoingEmail",
    "PermanentMailError",
    "SmtpPool",
    "TransientMailError",
    "build_message",
]
