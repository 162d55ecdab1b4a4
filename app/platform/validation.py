"""Checks of what clients send that a type alone cannot express: e-mail address syntax.

Addresses are checked with ``email-validator`` (a maintained implementation of RFC 5321/5322 and
the internationalised-address RFCs), syntax only: no DNS lookup on a request path. Special-use
domains (``.local``, ``.test``, ``localhost``…) are accepted: a self-hosted installation and its
tests legitimately send to them; whether an address receives mail is the mail server's answer.
"""

from __future__ import annotations

from email_validator import EmailNotValidError, validate_email

MAX_EMAIL_LENGTH = 254
"""RFC 5321: the longest forward path a mail server must accept."""

_SPECIAL_USE = "special-use or reserved name"


def email_problem(address: str) -> str | None:
    """Why ``address`` is not an e-mail address, or ``None`` when it is one."""
    if len(address) > MAX_EMAIL_LENGTH:
        return f"is longer than {MAX_EMAIL_LENGTH} characters"
    try:
        validate_email(address, check_deliverability=False, allow_display_name=False)
    except EmailNotValidError as exc:
        if _SPECIAL_USE in str(exc):
            return None
        return f"is not a valid e-mail address: {exc}"
    return None
