"""FN-31 (unsubscribe headers as mailbox providers read them): the raw bytes each sender hands the
SMTP server — funnel mail, campaign mail, a test send and an invitation — with a long
``PUBLIC_URL`` (so each unsubscribe URL is one word far longer than a 78-character line).

Read as bytes at the aiosmtpd server, not through a decoding parser (which would hide an RFC 2047
encoded-word): ``List-Unsubscribe``, ``List-Unsubscribe-Post``, ``Message-ID`` and every other
structured header are plain ASCII with no ``=?``, each physical line of the message is at most
998 octets, and a header is folded only at the whitespace after the comma between two ``<…>``.
"""

from __future__ import annotations

import itertools
import re

import pytest

from app.engines.funnels.campaigns.work.sender import send_until_done
from app.engines.funnels.contacts import erased_addresses
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions import service as definitions
from app.engines.funnels.definitions.graph import Graph
from app.engines.funnels.definitions.trial_send import compose_test
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.outbox.channel import ChannelSender
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import EmailChannel
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.work.runner import Runner
from app.integrations.mail import MailSender, PermanentMailError
from app.integrations.mail.folding import HARD_LIMIT, fold_structured, is_structured
from app.sandbox.smtp import ReceivedMessage, SmtpSink
from app.settings import MailSettings
from app.web.dashboard.organisation import send_invitation
from tests.conftest import auth, with_settings
from tests.engines.funnels.campaigns.test_campaigns import _campaign, _sender
from tests.engines.funnels.factories import Engine, contact, email_node, graph, published

LONG_URL = "https://links.mail.a-rather-long-company-name.example/" + "tracking/" * 8 + "sweep"


def fields(raw: bytes) -> list[tuple[str, list[bytes]]]:
    """The header section as ``(name, physical lines)`` per field, straight from the bytes."""
    head = raw.split(b"\r\n\r\n", 1)[0]
    out: list[tuple[str, list[bytes]]] = []
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t"):
            out[-1][1].append(line)
        else:
            out.append((line.split(b":", 1)[0].decode("ascii"), [line]))
    return out


def assert_on_the_wire(message: ReceivedMessage) -> dict[str, str]:
    """The checks on one message's raw bytes; its structured headers, unfolded."""
    raw = message.raw
    assert b"\r\n\r\n" in raw, "CRLF line ends as sent"
    assert max(len(line) for line in raw.split(b"\r\n")) <= HARD_LIMIT
    structured: dict[str, str] = {}
    for name, lines in fields(raw):
        if not is_structured(name):
            continue
        joined = b"".join(lines)
        assert joined.isascii(), (name, joined[:100])
        assert b"=?" not in joined, f"{name} is encoded: {joined[:120]!r}"
        for before, after in itertools.pairwise(lines):
            # Folded only after the comma between two <…> items.
            assert before.endswith(b">,"), (name, before[-40:])
            assert after.startswith(b" <"), (name, after[:40])
        structured[name.lower()] = (
            b" ".join(line.strip() for line in lines).decode()[len(name) + 1 :].strip()
        )
    return structured


def assert_unsubscribe_headers(message: ReceivedMessage) -> None:
    found = assert_on_the_wire(message)
    assert found["list-unsubscribe-post"] == "List-Unsubscribe=One-Click"
    urls = re.findall(r"<([^>]+)>", found["list-unsubscribe"])
    assert urls[0].startswith(f"{LONG_URL}/t/u/"), urls
    assert len(urls[0]) > 78
    assert urls[1].startswith("mailto:"), urls
    assert found["list-unsubscribe"] == ", ".join(f"<{u}>" for u in urls)
    assert found["message-id"] == message.message_id


@pytest.fixture
def long_url_engine(engine: Engine, runtime, funnel_settings) -> Engine:
    """The engine's funnel deliverer, its links pointing at :data:`LONG_URL`."""
    mail = MailSettings(
        smtp_host=engine.sink.host, smtp_port=engine.sink.port, from_address="f@test.example"
    )
    signing = WorkspaceTracking(runtime.db, runtime.secrets, LONG_URL, runtime.clock)
    email: ChannelSender = EmailChannel(
        MailSender(mail), signing=signing, mailto_address="unsubscribe@test.example"
    )
    engine.runner = Runner(
        runtime.db, funnel_settings, mail_domain="test.example", executors=EXECUTORS
    )
    engine.deliverer = Deliverer(
        runtime.db,
        funnel_settings,
        lambda channel: email if channel == "email" else None,
        lease_seconds=60,
        address_key=runtime.secrets.derive(erased_addresses.PURPOSE),
    )
    return engine


async def test_fn31_funnel_mail_headers_are_plain_ascii_folded_between_urls(
    runtime, tenant, long_url_engine: Engine
) -> None:
    ws = tenant.workspace_id
    await published(
        runtime,
        ws,
        graph(email_node("hi", subject="Héllo " * 30, body="Hi"), triggers=[{"kind": "manual"}]),
    )
    ann = await contact(runtime, ws, "ann@example.com")
    from tests.engines.funnels.outbox.test_unsubscribe import _enrol

    funnel_id = await _only_funnel(runtime, ws)
    await _enrol(runtime, funnel_id, ann)
    await long_url_engine.drive()
    [message] = long_url_engine.sink.messages
    assert_unsubscribe_headers(message)
    # The subject is human text: encoded as RFC 2047 requires, and still within the line limit.
    assert "=?utf-8?" in message.raw.split(b"\r\n\r\n")[0].decode()


async def _only_funnel(runtime, ws: int) -> int:
    from sqlalchemy import select

    from app.engines.funnels.models import Funnel

    async with runtime.db.read() as s:
        [funnel_id] = list(await s.scalars(select(Funnel.id).where(Funnel.workspace_id == ws)))
    return int(funnel_id)


async def test_fn31_campaign_mail_headers_are_plain_ascii_folded_between_urls(
    client, runtime, tenant, sink: SmtpSink
) -> None:
    await contact(runtime, tenant.workspace_id, "ann@example.com")
    c = await _campaign(client, tenant)
    started = await client.post(
        f"/api/v1/funnels/campaigns/{c['id']}/audience", headers=auth(tenant)
    )
    assert started.status_code == 200, started.text
    sender, pool = _sender(
        runtime, sink, signing=Tracking(LONG_URL, "secret"), mailto_address="u@test.example"
    )
    try:
        assert await send_until_done(sender, c["id"], runtime.clock)
    finally:
        await pool.aclose()
    [message] = sink.messages
    assert_unsubscribe_headers(message)


async def test_fn31_test_send_and_invitation_headers_are_plain_ascii(
    runtime, tenant, sink: SmtpSink, settings
) -> None:
    ws = tenant.workspace_id
    funnel_id, _ = await published(
        runtime, ws, graph(email_node("hi", subject="Hi", body="Hi"), triggers=[{"kind": "manual"}])
    )
    ann = await contact(runtime, ws, "ann@example.com")
    async with runtime.db.read() as s:
        funnel = await definitions.get_funnel(s, ws, funnel_id)
        version = await definitions.current_version(s, funnel)
        person = await get_contact(s, ws, ann)
    test_mail = compose_test(
        Graph(definitions.parse_definition(version.definition)),
        "hi",
        contact=person,
        to="boss@example.com",
        workspace_id=ws,
        base_url=LONG_URL,
        domain="a-very-long-mail-domain-name-for-message-ids.example." + "x" * 60,
    )
    mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="f@test.example")
    await MailSender(mail).send(test_mail)
    [trial] = sink.messages
    found = assert_on_the_wire(trial)
    urls = re.findall(r"<([^>]+)>", found["list-unsubscribe"])
    assert urls[0].startswith(LONG_URL)
    assert found["message-id"] == trial.message_id
    assert len(found["message-id"]) > 78

    invited = with_settings(settings, mail=mail)
    assert (
        await send_invitation(
            invited, invitation_id=7, to="new@example.com", workspace="Main", link=LONG_URL
        )
        is None
    )
    invitation = sink.messages[1]
    assert assert_on_the_wire(invitation)["message-id"] == invitation.message_id


def test_fn31_a_header_is_folded_only_after_a_comma_and_never_encoded() -> None:
    word = "<https://x.example/" + "a" * 120 + ">"
    folded = fold_structured("List-Unsubscribe", f"{word}, <mailto:u@x.example>, <https://y>")
    assert folded == f"List-Unsubscribe: {word},\r\n <mailto:u@x.example>, <https://y>\r\n"
    assert fold_structured("Message-ID", "<a@b>") == "Message-ID: <a@b>\r\n"
    with pytest.raises(PermanentMailError, match="ASCII"):
        fold_structured("List-Unsubscribe", "<https://é.example>")
    with pytest.raises(PermanentMailError, match="998"):
        fold_structured("List-Unsubscribe", "<https://x/" + "a" * 1000 + ">")
