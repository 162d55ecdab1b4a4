"""The wire bytes of a plain message, written directly: what :func:`~app.integrations.mail.wire.render`
of :func:`~app.integrations.mail.message.build_message` writes, byte for byte, without building
an ``EmailMessage``.

Why: building the message spends most of a sender's CPU in the ``email`` package parsing every
header it is given into a structured object (``headerregistry``) only to write it back out — some
3 ms a message, the ceiling of funnel and campaign mail. Almost every message we send is simple:
ASCII addresses, a short ASCII subject, our own structured headers, a text part and maybe an HTML
alternative. Such a message is written here; anything else (non-ASCII or long subject, display
names, inline images, a header the ``email`` package writes itself, a server without 8BITMIME
when a body needs it) is not, and :func:`wire_bytes` says ``None`` so the caller renders it the
general way. Bodies still go through the ``email`` package's own choice of transfer encoding
(``contentmanager``), so the body bytes are its own. ``tests/integrations/test_plain_wire.py``
holds the two renderings equal.
"""

from __future__ import annotations

import re
import secrets
import sys
from email import contentmanager, policy
from email.utils import formatdate

from app.integrations.mail.folding import SOFT_LIMIT, fold_structured, is_structured
from app.integrations.mail.message import (
    POSTMARK_METADATA_HEADER,
    OutgoingEmail,
    angle,
    is_own_header,
)

_ADDRESS = re.compile(
    r"[A-Za-z0-9_%+-]+(?:\.[A-Za-z0-9_%+-]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\Z"
)
"""An address the ``email`` package writes back exactly as given (no display name, no quoting)."""
_NAME = re.compile(r"[!-9;-~]+\Z")
"""A field name (RFC 5322 §2.2: printable ASCII but the colon)."""
_LINES = re.compile(r"\r\n|\r|\n")
_BUILT = policy.default
"""The policy ``build_message`` builds with (it decides the bodies' transfer encodings)."""
CRLF = "\r\n"
_BOUNDARY_DIGITS = len(repr(sys.maxsize - 1))
"""The digits of the ``email`` package's boundary number (19 on 64-bit builds)."""


def _plain_text_header(name: str, value: str) -> str | None:
    """``name: value`` as the ``email`` package writes a short ASCII header, or ``None``."""
    line = f"{name}: {value}"
    if (
        not value
        or not value.isascii()
        or not value.isprintable()
        or "=?" in value
        or " ".join(value.split()) != value
        or len(line) > SOFT_LIMIT
    ):
        return None
    return line + CRLF


def _body(text: str, subtype: str, *, eight_bit: bool) -> tuple[bytes, bytes] | None:
    """(content headers, body) of a text part, or ``None`` when only the ``email`` package
    can write it (an 8-bit body to a server that takes 7-bit only)."""
    cte, payload = contentmanager._encode_text(text, "utf-8", None, _BUILT)  # type: ignore[attr-defined]
    if cte == "8bit" and not eight_bit:
        return None
    body = CRLF.join(_LINES.split(payload)).encode("ascii", "surrogateescape")
    head = (
        f'Content-Type: text/{subtype}; charset="utf-8"{CRLF}Content-Transfer-Encoding: {cte}{CRLF}'
    )
    return head.encode("ascii"), body


def _boundary(body: bytes) -> str:
    """A multipart boundary of the ``email`` package's form (``Generator._make_boundary``) that
    ``body`` does not contain. Tested with a substring search rather than the package's regular
    expression, which is compiled anew for every message (its boundary is random): a twentieth of
    a sender's time went to compiling it."""
    token = "=" * 15 + f"{secrets.randbelow(sys.maxsize):0{_BOUNDARY_DIGITS}d}" + "=="
    boundary, counter = token, 0
    while b"--" + boundary.encode("ascii") in body:
        boundary, counter = f"{token}.{counter}", counter + 1
    return boundary


def _headers(email: OutgoingEmail, sender: str) -> str | None:
    """The top-level header lines up to the MIME ones, or ``None`` when one is not plain."""
    if not (_ADDRESS.match(sender) and email.to and all(_ADDRESS.match(a) for a in email.to)):
        return None
    lines = [
        _plain_text_header("From", sender),
        _plain_text_header("To", ", ".join(email.to)),
        _plain_text_header("Subject", email.subject),
    ]
    if any(line is None for line in lines):
        return None
    mid = angle(email.message_id)
    date = formatdate(localtime=False, usegmt=True).replace(" GMT", " +0000")
    own = [
        ("Message-ID", mid),
        ("X-Sweepline-Message-Id", mid),
        (POSTMARK_METADATA_HEADER, mid[1:-1].partition("@")[0][:80]),
        ("Date", date),
    ]
    given = [(n, v) for n, v in email.headers.items() if not is_own_header(n)]
    for name, value in [*own, *given]:
        plain = str(value)
        if not (_NAME.match(name) and is_structured(name) and plain.isascii()) or "=?" in plain:
            return None
        if not plain.isprintable():
            return None
        lines.append(fold_structured(name, plain))
    return "".join(line for line in lines if line is not None)


def wire_bytes(email: OutgoingEmail, *, sender: str, eight_bit: bool) -> bytes | None:
    """The message's bytes on the wire (CRLF line ends), or ``None``: not a plain message, render
    it with the ``email`` package. ``eight_bit``: the server takes ``BODY=8BITMIME``."""
    if email.html is not None and email.inline_images:
        return None
    if not sender.isascii() or not "".join(email.to).isascii():
        return None  # SMTPUTF8: the email package's policy writes those
    head = _headers(email, sender)
    text = _body(email.text, "plain", eight_bit=eight_bit)
    if head is None or text is None:
        return None
    if email.html is None:
        return head.encode("ascii") + text[0] + b"MIME-Version: 1.0\r\n\r\n" + text[1]
    html = _body(email.html, "html", eight_bit=eight_bit)
    if html is None:
        return None
    parts = [text[0] + b"\r\n" + text[1], html[0] + b"MIME-Version: 1.0\r\n\r\n" + html[1]]
    boundary = _boundary(b"".join(parts))
    marker = f"--{boundary}".encode("ascii")
    top = (
        head
        + f'MIME-Version: 1.0\r\nContent-Type: multipart/alternative;\r\n boundary="{boundary}"'
    )
    return b"\r\n".join(
        [top.encode("ascii"), b"", marker, parts[0], marker, parts[1], marker + b"--", b""]
    )
