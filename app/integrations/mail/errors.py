"""Mail delivery failures, sorted by whether a retry can help.

They belong to the outbound family (:class:`~app.integrations.http_guard.OutboundError`), so a
caller that handles every outside failure handles a refused message too: ``provider`` is
``"smtp"``, ``status`` the server's reply code when it gave one, and ``transient`` what
:func:`~app.integrations.http_guard.is_transient_smtp_reply` says of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from app.integrations.http_guard.errors import OutboundError, PermanentError, TransientError

PROVIDER = "smtp"


class MailError(OutboundError):
    """A message could not be handed to the SMTP server."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message, provider=PROVIDER, status=code)

    @property
    def reply_code(self) -> int | None:
        """The SMTP reply code (``451``, ``550``…), when the server answered."""
        return self.status

    def __str__(self) -> str:
        # The message already says "SMTP 550: …"; no provider prefix, as before.
        return self.message


class TransientMailError(MailError, TransientError):
    """A 4xx reply, a timeout or a connection failure: the same message may succeed later."""


class PermanentMailError(MailError, PermanentError):
    """A 5xx reply: the server refused the message for good (bad address, policy)."""


@contextmanager
def mail_failures_as(
    transient: Callable[[str], Exception], permanent: Callable[[str], Exception]
) -> Iterator[None]:
    """Raise a failed send's :class:`TransientMailError` / :class:`PermanentMailError` as the
    caller's own retry-or-not errors, made from the message."""
    try:
        yield
    except TransientMailError as exc:
        raise transient(str(exc)) from exc
    except PermanentMailError as exc:
        raise permanent(str(exc)) from exc
