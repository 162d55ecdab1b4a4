"""The message to send and its MIME rendering."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate

import msgspec

from app.integrations.mail.postmark import METADATA_KEY

POSTMARK_METADATA_HEADER = f"X-PM-Metadata-{METADATA_KEY}"


class InlineImage(msgspec.Struct, frozen=True, kw_only=True):
    """An image the HTML part shows by ``<img src="cid:{content_id}">``: sent as a part of a
    ``multipart/related`` beside the HTML, so clients show it without fetching anything."""

    content_id: str
    """Without angle brackets, e.g. ``chart-positions@sweepline``."""
    subtype: str
    """Of ``image/…``, e.g. ``png``."""
    data: bytes


class OutgoingEmail(msgspec.Struct, frozen=True, kw_only=True):
    """One e-mail. ``message_id`` is stable per effect, so a redelivery carries the same
    ``Message-ID`` header and receivers (and our own sink) can recognise it."""

    to: list[str]
    subject: str
    text: str
    html: str | None = None
    message_id: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    inline_images: list[InlineImage] = msgspec.field(default_factory=list)
    """Shown by the HTML part only (ignored without ``html``)."""


OWN_HEADERS = frozenset(
    {
        "from",
        "to",
        "subject",
        "message-id",
        "date",
        "x-sweepline-message-id",
        POSTMARK_METADATA_HEADER.lower(),
    }
)
"""Written by :func:`build_message` itself: a caller's header of one of these names is dropped."""


def is_own_header(name: str) -> bool:
    return name.lower() in OWN_HEADERS


def angle(message_id: str) -> str:
    """Message-ID headers are ``<local@domain>``; accept the bare form too."""
    value = message_id.strip()
    if not value.startswith("<"):
        value = f"<{value}>"
    return value


def one_line(value: str) -> str:
    """A header's text on one line. A subject rendered from a person's words or a contact's field
    may hold a line break; a header cannot carry one (passed on, it would start a header of its
    own), so each becomes a space, as a mail client shows a folded subject."""
    return " ".join(value.splitlines())


def build_message(email: OutgoingEmail, *, sender: str) -> EmailMessage:
    """Render ``email`` as a MIME message (text, plus an HTML alternative when given; with inline
    images the HTML alternative is a ``multipart/related`` of the HTML and the images)."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(email.to)
    msg["Subject"] = one_line(email.subject)
    msg["Message-ID"] = angle(email.message_id)
    # The same id again: some providers (Amazon SES) replace Message-ID with their own, and
    # delivery reports are attributed by it.
    msg["X-Sweepline-Message-Id"] = angle(email.message_id)
    # And once more where Postmark looks: its reports carry only its own message id and the
    # message's metadata, which its SMTP service takes from ``X-PM-Metadata-*`` headers (a value
    # is at most 80 characters, so the id's local part, which is what attribution reads).
    msg[POSTMARK_METADATA_HEADER] = angle(email.message_id)[1:-1].partition("@")[0][:80]
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    for name, value in email.headers.items():
        if is_own_header(name):
            continue  # the fields above are ours; a caller header must not duplicate them
        msg[name] = value
    msg.set_content(email.text)
    if email.html is not None:
        msg.add_alternative(email.html, subtype="html")
        if email.inline_images:
            html_part = next(p for p in msg.iter_parts() if p.get_content_type() == "text/html")
            for image in email.inline_images:
                html_part.add_related(
                    image.data,
                    maintype="image",
                    subtype=image.subtype,
                    cid=angle(image.content_id),
                    disposition="inline",
                )
    return msg
