"""The SMTP sender against a real loopback SMTP server (aiosmtpd), including injected failures."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from app.integrations.mail import (
    MailSender,
    OutgoingEmail,
    PermanentMailError,
    TransientMailError,
)
from app.sandbox.base import free_port
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as s:
        yield s


def sender_for(sink: SmtpSink) -> MailSender:
    return MailSender(MailSettings(smtp_host=sink.host, smtp_port=sink.port, timeout_seconds=5))


def email(message_id: str = "effect-1@sweepline", **kw: object) -> OutgoingEmail:
    base: dict[str, object] = {
        "to": ["ada@example.com"],
        "subject": "Welcome",
        "text": "Hello Ada",
        "message_id": message_id,
    }
    base.update(kw)
    return OutgoingEmail(**base)  # type: ignore[arg-type]


async def test_sends_text_and_html_with_stable_message_id(sink: SmtpSink) -> None:
    sender = sender_for(sink)
    await sender.send(
        email(html="<p>Hello Ada</p>", headers={"X-Effect-Key": "k1", "List-Unsubscribe": "<u>"})
    )
    await sender.send(email())  # a redelivery of the same effect carries the same Message-ID
    assert len(sink.messages) == 2
    first = sink.messages[0]
    assert first.message_id == "<effect-1@sweepline>"
    assert first.to == ["ada@example.com"]
    assert first.subject == "Welcome"
    assert first.body.strip() == "Hello Ada"
    assert first.html is not None
    assert "<p>Hello Ada</p>" in first.html
    assert first.headers["X-Effect-Key"] == "k1"
    assert sink.count_by_message_id()["<effect-1@sweepline>"] == 2
    assert sink.url == f"smtp://127.0.0.1:{sink.port}"


async def test_4xx_is_transient_then_succeeds(sink: SmtpSink) -> None:
    sink.inject_failure(code=451, times=1)
    sender = sender_for(sink)
    with pytest.raises(TransientMailError) as info:
        await sender.send(email())
    assert info.value.status == 451
    assert sink.messages == []
    await sender.send(email())
    assert len(sink.messages) == 1


async def test_5xx_is_permanent(sink: SmtpSink) -> None:
    sink.inject_failure(code=554, times=1)
    with pytest.raises(PermanentMailError) as info:
        await sender_for(sink).send(email())
    assert info.value.status == 554


async def test_connection_refused_is_transient() -> None:
    closed = MailSender(
        MailSettings(smtp_host="127.0.0.1", smtp_port=free_port(), timeout_seconds=2)
    )
    with pytest.raises(TransientMailError):
        await closed.send(email())


async def test_no_recipients_is_permanent(sink: SmtpSink) -> None:
    with pytest.raises(PermanentMailError):
        await sender_for(sink).send(email(to=[]))


def test_sink_works_from_sync_code() -> None:
    import asyncio

    with SmtpSink() as sink:
        settings = dataclasses.replace(MailSettings(), smtp_host=sink.host, smtp_port=sink.port)
        asyncio.run(MailSender(settings).send(email("sync@x")))
        assert [m.message_id for m in sink.messages] == ["<sync@x>"]


async def test_a_subject_with_line_breaks_goes_out_on_one_line(sink: SmtpSink) -> None:
    """A subject holding CR/LF (typed into a campaign, or from a contact's field) is sent on one
    line: never a header of its own, never a refused build."""
    await sender_for(sink).send(email(subject="Spring sale\r\nBcc: all@example.com\nnow"))
    (received,) = sink.messages
    assert received.subject == "Spring sale Bcc: all@example.com now"
    assert "Bcc" not in {name.title() for name in received.headers}
