"""Reading the messages the SMTP sink received as a mail client would."""

from __future__ import annotations

from email import message_from_bytes, policy
from email.message import EmailMessage, Message


def parsed(raw: bytes) -> EmailMessage:
    """``raw`` parsed with the modern policy (an :class:`EmailMessage`)."""
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def parts(message: Message) -> list[EmailMessage]:
    """The parts of a multipart ``message`` parsed by :func:`parsed`, in order."""
    found = message.get_payload()
    assert isinstance(found, list)
    assert all(isinstance(part, EmailMessage) for part in found)
    return [part for part in found if isinstance(part, EmailMessage)]
