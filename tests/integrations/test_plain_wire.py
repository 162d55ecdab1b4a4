"""A plain message's bytes, written directly (``plain_wire``), are the bytes the ``email`` package
writes for it (``render(build_message(...))``), byte for byte but for the two values that differ
from one rendering to the next (the multipart boundary, a random number, and the Date); a message
that is not plain is left to the ``email`` package. And on the wire: a message sent over SMTP
arrives as the server's parser reads the general rendering."""

from __future__ import annotations

import re
from email import message_from_bytes, policy
from email.message import EmailMessage

import pytest

from app.integrations.mail import MailSender, OutgoingEmail
from app.integrations.mail.message import InlineImage, build_message
from app.integrations.mail.plain_wire import wire_bytes
from app.integrations.mail.wire import render
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings

LONG_URL = "https://links.mail.a-rather-long-company-name.example/" + "tracking/" * 8 + "sweep"
UNSUBSCRIBE = {
    "X-Sweepline-Effect": "run-7-step-2",
    "List-Unsubscribe": f"<{LONG_URL}?u=abc>, <mailto:unsubscribe@example.com?subject=u-abc>",
    "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
}
BOUNDARY = re.compile(rb"={15}\d{19}==")
DATE = re.compile(rb"^Date: [^\r]*\r\n", re.M)


def email(**kw: object) -> OutgoingEmail:
    base: dict[str, object] = {
        "to": ["ada@example.com"],
        "subject": "Welcome, Ada",
        "text": "Hello Ada,\n\nthe news of the week: https://example.com/news\n",
        "message_id": "<run-7-step-2.w1@mail.example>",
        "headers": dict(UNSUBSCRIBE),
    }
    base.update(kw)
    return OutgoingEmail(**base)  # type: ignore[arg-type]


def comparable(raw: bytes) -> bytes:
    return DATE.sub(b"Date: -\r\n", BOUNDARY.sub(b"BOUNDARY", raw))


PLAIN = {
    "text only": email(),
    "with an HTML alternative": email(html="<p>Hello <b>Ada</b></p>"),
    "lines longer than 78 (quoted-printable)": email(text="word " * 40 + "\n" + LONG_URL * 3),
    "a long body (more than ten lines)": email(text="line\n" * 30 + LONG_URL + "\n"),
    "non-ASCII body (8bit)": email(text="Grüße, Ada ✓\n", html="<p>Grüße</p>"),
    "non-ASCII long lines": email(text="é" * 120 + "\n" * 12 + "ü" * 50),
    "several recipients": email(to=["ada@example.com", "bob.smith+news@mail.example.org"]),
    "a bare Message-ID, a caller's Date dropped": email(
        message_id="effect-1@sweepline", headers={"Date": "yesterday", "X-Campaign": "3"}
    ),
    "empty text": email(text="", html=""),
    "CRLF and CR line ends": email(text="one\r\ntwo\rthree\n"),
}
NOT_PLAIN = {
    "non-ASCII subject": email(subject="Grüße"),
    "a subject longer than a line": email(subject="word " * 20),
    "an encoded word in the subject": email(subject="=?utf-8?q?hi?="),
    "a display name": email(to=["Ada Lovelace <ada@example.com>"]),
    "a header the email package writes": email(headers={"Reply-To": "ada@example.com"}),
    "inline images": email(
        html='<img src="cid:c@x">',
        inline_images=[InlineImage(content_id="c@x", subtype="png", data=b"\x89PNG")],
    ),
    "non-ASCII address": email(to=["adä@example.com"]),
}


@pytest.mark.parametrize("eight_bit", [True, False])
@pytest.mark.parametrize("case", PLAIN)
def test_a_plain_message_is_written_as_the_email_package_writes_it(
    case: str, eight_bit: bool
) -> None:
    message = PLAIN[case]
    direct = wire_bytes(message, sender="news@mail.example", eight_bit=eight_bit)
    general = render(
        build_message(message, sender="news@mail.example"),
        cte_type="8bit" if eight_bit else "7bit",
    )
    if direct is None:
        # Only an 8-bit body to a 7-bit server is left to the email package.
        assert not eight_bit
        assert not (message.text + (message.html or "")).isascii()
        return
    assert comparable(direct) == comparable(general)
    assert BOUNDARY.search(direct) or message.html is None


@pytest.mark.parametrize("case", NOT_PLAIN)
def test_a_message_that_is_not_plain_is_left_to_the_email_package(case: str) -> None:
    assert wire_bytes(NOT_PLAIN[case], sender="news@mail.example", eight_bit=True) is None


def test_a_display_name_sender_is_left_to_the_email_package() -> None:
    assert wire_bytes(email(), sender="News <news@mail.example>", eight_bit=True) is None


async def test_a_plain_message_arrives_whole_over_smtp() -> None:
    message = email(html="<p>Grüße, Ada</p>", text="Grüße\n" + LONG_URL * 2)
    with SmtpSink() as sink:
        settings = MailSettings(
            smtp_host=sink.host, smtp_port=sink.port, timeout_seconds=5, from_address="n@x.example"
        )
        await MailSender(settings).send(message)
        (got,) = sink.snapshot()
    assert got.message_id == message.message_id
    assert got.subject == message.subject
    # The sink's parser keeps an 8-bit part's CRLF line ends.
    assert got.body.replace("\r\n", "\n").rstrip("\n") == message.text
    assert got.html is not None
    assert got.html.replace("\r\n", "\n").rstrip("\n") == message.html
    assert got.headers["List-Unsubscribe"] == UNSUBSCRIBE["List-Unsubscribe"]


def test_a_boundary_is_never_one_the_parts_contain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The random boundary comes out the same twice here; the text carries it and its first
    alternative, so the message gets the second, and a reader finds both parts whole."""
    monkeypatch.setattr("app.integrations.mail.plain_wire.secrets.randbelow", lambda _: 7)
    taken = "=" * 15 + f"{7:019d}" + "=="
    text = f"--{taken}\n--{taken}.0\nHello Ada\n"
    raw = wire_bytes(email(text=text, html="<p>Hi</p>"), sender="n@mail.example", eight_bit=True)
    assert raw is not None
    found = re.search(rb'boundary="([^"]+)"', raw)
    assert found is not None
    assert found[1] == f"{taken}.1".encode()
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    parts = [part.get_content() for part in parsed.iter_parts()]
    assert parts == [text.replace("\n", "\r\n"), "<p>Hi</p>\r\n"]  # the wire's line ends
