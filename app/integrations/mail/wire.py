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

import re
from contextlib import suppress
from email.generator import BytesGenerator
from email.message import EmailMessage
from email.policy import SMTP, SMTPUTF8, EmailPolicy
from io import BytesIO
from typing import Any

import aiosmtplib
from aiosmtplib import SMTPStatus

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
    """Send ``email`` from ``sender`` in one SMTP transaction on the connected ``client``."""
    await (await withhold(client, email, sender=sender)).complete()


_LINE_ENDS = re.compile(rb"\r\n|\n|\r")
_LEADING_DOT = re.compile(rb"(?m)^\.")


class Withheld:
    """An SMTP transaction whose message is on the wire but not yet ended.

    A server delivers nothing before the line that ends the data, ``.`` alone (RFC 5321
    §4.1.1.4), and discards a transaction whose connection closes before it. So a message can
    travel while something else runs — a sender waiting for its previous outcome's commit —
    and be delivered, by :meth:`complete`, only once that is done; :meth:`abort` gives it up
    with nothing delivered."""

    __slots__ = ("_client",)

    def __init__(self, client: aiosmtplib.SMTP) -> None:
        self._client = client

    async def complete(self) -> None:
        """End the data: the server delivers the message (raises what ``sendmail`` raises)."""
        protocol = self._client.protocol
        if protocol is None:
            raise aiosmtplib.SMTPServerDisconnected("Connection lost")
        try:
            protocol.write(b".\r\n")
            # Read at once: the reply cannot arrive before we wait for it.
            reply = await protocol.read_response(timeout=self._client.timeout)
        except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError):
            self._client.close()
            raise
        if reply.code != SMTPStatus.completed:
            raise aiosmtplib.SMTPDataError(reply.code, reply.message)

    def abort(self) -> None:
        """Give the message up: the connection is closed, so the server delivers nothing."""
        self._client.close()


async def withhold(client: aiosmtplib.SMTP, email: OutgoingEmail, *, sender: str) -> Withheld:
    """Put ``email`` from ``sender`` on the wire in one SMTP transaction on the connected
    ``client`` — envelope, ``DATA`` and the whole message — without the line that ends it
    (see :class:`Withheld`). What ``aiosmtplib``'s ``sendmail`` does up to its last line, with
    the message rendered by :func:`render`."""
    if client.is_ehlo_or_helo_needed:
        await client.ehlo()  # the extensions below are read from its answer
    options, data = _envelope_options_and_data(client, email, sender)
    encoding = "utf-8" if "SMTPUTF8" in options else "ascii"
    try:
        await client.mail(sender, options=options, encoding=encoding)
        refused: list[aiosmtplib.SMTPRecipientRefused] = []
        for recipient in email.to:
            try:
                await client.rcpt(recipient, encoding=encoding)
            except aiosmtplib.SMTPRecipientRefused as exc:
                refused.append(exc)
        if len(refused) == len(email.to):
            raise aiosmtplib.SMTPRecipientsRefused(refused)
        start = await client.execute_command(b"DATA")
        if start.code != SMTPStatus.start_input:
            raise aiosmtplib.SMTPDataError(start.code, start.message)
    except (aiosmtplib.SMTPResponseException, aiosmtplib.SMTPRecipientsRefused):
        # Clear the refused envelope so the connection can carry the next message (as
        # ``sendmail`` does); one that cannot is closed by its owner.
        with suppress(aiosmtplib.SMTPException, OSError, TimeoutError):
            await client.rset()
        raise
    if client.protocol is None:
        raise aiosmtplib.SMTPServerDisconnected("Connection lost")
    stuffed = data.startswith(b".") or b"\n." in data
    client.protocol.write(_LEADING_DOT.sub(b"..", data) if stuffed else data)
    return Withheld(client)


def _envelope_options_and_data(
    client: aiosmtplib.SMTP, email: OutgoingEmail, sender: str
) -> tuple[list[str], bytes]:
    """The ``MAIL FROM`` options the server takes and the message's bytes (CRLF line ends, as
    ``DATA`` carries them before dot-stuffing)."""
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
    # Both renderings already end every line with CRLF: counting says so in a fifth of the
    # time a rewrite takes.
    clean = raw.count(b"\n") == raw.count(b"\r\n") == raw.count(b"\r")
    data = raw if clean else _LINE_ENDS.sub(b"\r\n", raw)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    if client.supports_extension("size"):
        options.insert(0, f"SIZE={len(data)}")  # RFC 1870: the octets DATA carries
    return options, data
