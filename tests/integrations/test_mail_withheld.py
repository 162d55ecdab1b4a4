"""A message prepared on a pooled SMTP connection is on the wire but delivered only when
completed, and never when aborted (real loopback SMTP server)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from app.integrations.mail import OutgoingEmail, PermanentMailError, SmtpPool, TransientMailError
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as s:
        yield s


def pool_for(sink: SmtpSink) -> SmtpPool:
    return SmtpPool(MailSettings(smtp_host=sink.host, smtp_port=sink.port, timeout_seconds=5), 1)


def email(n: int, text: str = "Hello") -> OutgoingEmail:
    return OutgoingEmail(
        to=[f"p{n}@example.com"], subject="Hi", text=text, message_id=f"m{n}@sweepline"
    )


async def settle() -> None:
    """Long enough for the server to have delivered anything it was going to."""
    await asyncio.sleep(0.3)


async def test_a_prepared_message_is_delivered_only_once_completed(sink: SmtpSink) -> None:
    pool = pool_for(sink)
    prepared = await pool.prepare(email(1, "Hello\n.a line that starts with a dot\n"))
    await settle()
    assert sink.snapshot() == []  # the whole message is out, but not the end of data
    await prepared.complete()
    [got] = sink.snapshot()
    assert got.message_id == "<m1@sweepline>"
    # Dot-stuffed on the wire and unstuffed by the server: the line arrives as written.
    assert ".a line that starts with a dot" in got.body.splitlines()
    await pool.aclose()


async def test_an_aborted_message_is_never_delivered_and_the_pool_goes_on(
    sink: SmtpSink,
) -> None:
    pool = pool_for(sink)
    prepared = await pool.prepare(email(1))
    prepared.abort()
    await settle()
    assert sink.snapshot() == []
    await pool.send(email(2))  # the pool's one connection was given back, and reopens
    await settle()
    assert [m.message_id for m in sink.snapshot()] == ["<m2@sweepline>"]
    await pool.aclose()


async def test_a_refusal_at_the_end_of_data_is_the_send_s_failure(sink: SmtpSink) -> None:
    pool = pool_for(sink)
    sink.inject_failure(550, times=1)
    prepared = await pool.prepare(email(1))
    with pytest.raises(PermanentMailError) as refused:
        await prepared.complete()
    assert "550" in str(refused.value)
    await pool.send(email(2))  # the connection still carries the next message
    assert [m.message_id for m in sink.snapshot()] == ["<m2@sweepline>"]
    await pool.aclose()


async def test_bare_line_ends_and_leading_dots_are_written_as_smtp_requires(
    sink: SmtpSink,
) -> None:
    """Lines ending in a lone CR or LF go out as CRLF, and a line starting with a dot is
    dot-stuffed, so the server reads the body the sender wrote (checked on the raw bytes)."""
    pool = pool_for(sink)
    body = "first\nsecond\r.third\r\n.\r\nlast"
    await pool.send(email(1, body))
    await pool.send(email(2, "plain\r\nlines\r\n"))
    first, second = sink.snapshot()
    assert b"first\r\nsecond\r\n.third\r\n.\r\nlast\r\n" in first.raw
    assert b"plain\r\nlines\r\n" in second.raw
    await pool.aclose()


async def test_a_deferral_at_the_end_of_data_is_transient_and_the_pool_reconnects(
    sink: SmtpSink,
) -> None:
    pool = pool_for(sink)
    sink.inject_failure(451, times=1)
    prepared = await pool.prepare(email(1))
    with pytest.raises(TransientMailError):
        await prepared.complete()
    await pool.send(email(2))  # a deferring server may be shedding load: a fresh connection
    assert [m.message_id for m in sink.snapshot()] == ["<m2@sweepline>"]
    await pool.aclose()


async def test_a_server_gone_while_a_message_waits_delivers_nothing_and_is_transient() -> None:
    sink = SmtpSink().start()
    pool = pool_for(sink)
    prepared = await pool.prepare(email(1))
    sink.stop()  # the server goes away with the message unfinished
    with pytest.raises(TransientMailError):
        await prepared.complete()
    assert sink.snapshot() == []
    await pool.aclose()
