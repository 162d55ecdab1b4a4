"""Mail delivery failures, sorted by whether a retry can help."""

from __future__ import annotations


class MailError(Exception):
    """A message could not be handed to the SMTP server."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TransientMailError(MailError):
    """A 4xx reply, a timeout or a connection failure: the same message may succeed later."""


class PermanentMailError(MailError):
    """A 5xx reply: the server refused the message for good (bad address, policy)."""
