"""A loopback SMTP server that keeps what it receives (tests, benchmarks and the demo).

``SmtpSink().start()`` runs an aiosmtpd server on a free port of 127.0.0.1 in its own thread, so it
works from synchronous and asynchronous code and receives mail from other processes too. Each
accepted message is parsed into a :class:`ReceivedMessage`. Like every simulator it counts calls
(kind ``data``: each message's DATA command) and answers injected faults: ``inject("data",
status=451)`` (or :meth:`SmtpSink.inject_failure`) makes the next DATA commands answer with an SMTP
error code, the way a real server defers or refuses mail; ``slow_down`` makes it take its time
before answering DATA, the way a loaded or tarpitting server does (real servers take seconds per
message, up to the client's timeout). :meth:`SmtpSink.reset` empties the mailbox, the counts and
the faults and answers at once again.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any, ClassVar

from aiosmtpd.controller import Controller

from app.sandbox.base import SandboxState, Simulator, free_port


@dataclass(frozen=True)
class ReceivedMessage:
    """One message accepted by the sink."""

    message_id: str
    to: list[str]
    mail_from: str
    subject: str
    body: str
    html: str | None
    headers: dict[str, str]
    raw: bytes = field(repr=False)


def _parse(raw: bytes, rcpt_tos: list[str], mail_from: str) -> ReceivedMessage:
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    text_part = parsed.get_body(preferencelist=("plain",))
    html_part = parsed.get_body(preferencelist=("html",))
    body = text_part.get_content() if text_part is not None else ""
    html = html_part.get_content() if html_part is not None else None
    headers = {name: str(value) for name, value in parsed.items()}
    return ReceivedMessage(
        message_id=str(parsed.get("Message-ID", "")).strip(),
        to=list(rcpt_tos),
        mail_from=mail_from,
        subject=str(parsed.get("Subject", "")),
        body=body,
        html=html,
        headers=headers,
        raw=raw,
    )


class _Handler:
    def __init__(self, sink: SmtpSink) -> None:
        self._sink = sink

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self._sink.delay_seconds > 0:
            await asyncio.sleep(self._sink.delay_seconds)
        return self._sink._receive(envelope)


class SmtpSink(Simulator):
    """The SMTP server; ``messages`` lists what arrived, in order."""

    _running: ClassVar[list[SmtpSink]] = []
    """Sinks started in this process (the demo's dashboard shows their mailboxes)."""

    def __init__(self, port: int | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.url = f"smtp://{self.host}:{self.port}"
        self.messages: list[ReceivedMessage] = []
        self.state = SandboxState()
        self.delay_seconds = 0.0
        """How long each DATA command waits before it is answered (see :meth:`slow_down`)."""
        self._lock = threading.Lock()
        self._controller = Controller(_Handler(self), hostname=self.host, port=self.port)
        self._started = False

    def start(self) -> SmtpSink:
        self._controller.start()
        self._started = True
        SmtpSink._running.append(self)
        return self

    def stop(self) -> None:
        if self._started:
            self._controller.stop()
            self._started = False
            if self in SmtpSink._running:
                SmtpSink._running.remove(self)

    @classmethod
    def running(cls) -> list[SmtpSink]:
        return list(cls._running)

    def __enter__(self) -> SmtpSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def inject_failure(self, code: int = 451, times: int = 1, text: str = "") -> None:
        """Answer the next ``times`` DATA commands with ``code`` (4xx defers, 5xx refuses)."""
        reason = text or ("Requested action aborted: try again later" if code < 500 else "Rejected")
        self.inject("data", status=code, times=times, body=reason)

    def slow_down(self, seconds: float) -> None:
        """Answer each message's DATA only after ``seconds`` (0 answers at once again)."""
        self.delay_seconds = max(0.0, seconds)

    def _receive(self, envelope: Any) -> str:
        fault = self.state.hit("data", to=list(envelope.rcpt_tos))
        if fault is not None:
            reason = fault.body if isinstance(fault.body, str) else "Requested action aborted"
            return f"{fault.status} {reason}"
        with self._lock:
            raw = envelope.original_content or envelope.content
            if isinstance(raw, str):
                raw = raw.encode()
            self.messages.append(_parse(raw, list(envelope.rcpt_tos), envelope.mail_from))
        return "250 Message accepted for delivery"

    def snapshot(self) -> list[ReceivedMessage]:
        """A copy of the received messages (safe to iterate while mail keeps arriving)."""
        with self._lock:
            return list(self.messages)

    def count_by_message_id(self) -> Counter[str]:
        """How many times each Message-ID arrived (a value above 1 is a duplicate delivery)."""
        return Counter(m.message_id for m in self.snapshot())

    def reset_data(self) -> None:
        with self._lock:
            self.messages.clear()
            self.delay_seconds = 0.0
