"""The bytes of a message as they leave the process, and the SMTP transaction that carries them.

Every sender (funnel and campaign mail, test sends, invitations, notices) goes through
:func:`transmit`, so how headers are written is decided here once.

Why not the ``email`` package's own serialisation (what ``aiosmtplib.send_message`` uses, with
``email.policy.SMTP``): a header whose single word is longer than the 78-character line is
RFC 2047-encoded (``List-Unsubscribe: =?utf-8?q?=3Chttps=3A//…?=``). Mailbox providers do not
decode encoded-words in ``List-Unsubscribe`` (RFC 2369/8058) or ``Message-ID``: the unsubscribe
button disappears and the message id no longer matches. So every structured header — all but the
human-readable ones (subject and address headers, which may need encoding for non-ASCII names) and
the MIME headers the ``email`` package writes itself — is written as plain ASCII, as given, folded
only at the whitespace after a comma between items (``<https://…>,\\r\\n <mailto:…>``), and only
where the line would pass 78 characters; no physical line may pass RFC 5322's 998.
"""

from __future__ import annotations

from email.generator import BytesGenerator
from email.message import EmailMessage
from email.policy import SMTP, SMTPUTF8, EmailPolicy
from io import BytesIO
from typing import Any

import aiosmtplib

from app.integrations.mail import plain_wire
from app.integrations.mail.errors import PermanentMailError
from app.integrations.mail.folding import (  # noqa: F401 - the wire's rules, read from here too
    HARD_LIMIT,
    SOFT_LIMIT,
    TEXT_HEADERS,
    fold_structured,
    is_structured,
)
from app.integrations.mail.message import OutgoingEmail, build_message


class WirePolicy(EmailPolicy):
    """``email.policy.SMTP`` (or ``SMTPUTF8``), with structured headers written verbatim."""

    def fold(self, name: str, value: Any) -> str:
        if is_structured(name):
            return fold_structured(name, value, self.linesep)
        return str(super().fold(name, value))

    def fold_binary(self, name: str, value: Any) -> bytes:
        if is_structured(name):
            return fold_structured(name, value, self.linesep).encode("ascii")
        return bytes(super().fold_binary(name, value))


_POLICIES = {
    (utf8, cte): WirePolicy(**{**base.__dict__, "cte_type": cte})
    for utf8, base in ((False, SMTP), (True, SMTPUTF8))
    for cte in ("8bit", "7bit")
}


def render(message: EmailMessage, *, utf8: bool = False, cte_type: str = "8bit") -> bytes:
    """The message's bytes on the wire (CRLF line ends)."""
    out = BytesIO()
    BytesGenerator(out, policy=_POLICIES[(utf8, cte_type)]).flatten(message)
    return out.getvalue()


async def transmit(client: aiosmtplib.SMTP, email: OutgoingEmail, *, sender: str) -> None:
    """Send ``email`` from ``sender`` in one SMTP transaction on the connected ``client``:
    what ``aiosmtplib``'s ``send_message`` does, with the message rendered by :func:`render`."""
    if client.is_ehlo_or_helo_needed:
        await client.ehlo()  # the extensions below are read from its answer
    options: list[str] = []
    utf8 = not (sender.isascii() and "".join(email.to).isascii())
    if utf8:
        if not client.supports_extension("smtputf8"):
            raise PermanentMailError("a non-ASCII address, and the server does not take SMTPUTF8")
        options.append("SMTPUTF8")
    eight_bit = client.supports_extension("8BITMIME")
    if eight_bit:
        options.append("BODY=8BITMIME")
    # Most messages are plain and written directly; the others by the email package.
    raw = plain_wire.wire_bytes(email, sender=sender, eight_bit=eight_bit) or render(
        build_message(email, sender=sender), utf8=utf8, cte_type="8bit" if eight_bit else "7bit"
    )
    await client.sendmail(sender, email.to, raw, mail_options=options)
