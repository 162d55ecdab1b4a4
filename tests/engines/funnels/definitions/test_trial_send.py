"""Test send (issue: "send one message node to a chosen address with a chosen contact's
variables, marked as a test, counted nowhere"): the message reaches the SMTP sink marked as a
test, rendered for the chosen contact; no run, step, outbox row or delivery record appears, and
its unsubscribe link changes nothing."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.engines.funnels.models import Contact, DeliveryEvent, OutboxEffect, Run, Step
from app.integrations.mail import MailSender
from app.settings import MailSettings
from tests.conftest import auth
from tests.engines.funnels.factories import (
    contact,
    email_node,
    graph,
    published,
    replace_funnels_deps,
    settle,
)


async def _count(runtime, model) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(model)) or 0)


async def test_a_test_send_is_marked_and_counted_nowhere(client, runtime, tenant, sink) -> None:
    ws = tenant.workspace_id
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            email_node("hello", subject="Hi {{first_name}}", body="Dear {{first_name}}, bye."),
            triggers=[{"kind": "manual"}],
        ),
    )
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="f@test.example")
    replace_funnels_deps(runtime, trial_mail=MailSender(mail))
    got = await client.post(
        f"/api/v1/funnels/{funnel_id}/test-send",
        json={"node_id": "hello", "to": "boss@example.com", "contact_id": ann, "draft": False},
        headers=auth(tenant),
    )
    assert got.status_code == 200, got.text
    [message] = sink.messages
    assert message.to == ["boss@example.com"]
    assert message.subject == "[Test] Hi Ann"
    assert message.headers["X-Sweepline-Test"] == "1"
    assert message.body.startswith("Dear Ann, bye.")
    link = re.findall(r"<(https?://[^>]+)>", message.headers["List-Unsubscribe"])[0]
    page = await client.get(link.removeprefix(runtime.settings.web.public_url))
    assert page.status_code == 200
    assert "test message: nothing changes" in page.text
    # A report about it attributes nothing.
    await client.post(
        "/hooks/funnels/delivery",
        json={"event_id": "t1", "kind": "bounced", "message_id": message.message_id},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    await settle(runtime)
    for model in (Run, Step, OutboxEffect, DeliveryEvent):
        assert await _count(runtime, model) == 0
    async with runtime.db.read() as s:
        found = await s.get(Contact, ann)
        assert found is not None
        assert found.suppressed == {}

    wrong = await client.post(
        f"/api/v1/funnels/{funnel_id}/test-send",
        json={"node_id": "nope", "to": "boss@example.com"},
        headers=auth(tenant),
    )
    assert wrong.status_code == 422
    assert wrong.json()["details"][0]["field"] == "node_id"
    bad_to = await client.post(
        f"/api/v1/funnels/{funnel_id}/test-send",
        json={"node_id": "hello", "to": "boss@example.com\r\nBcc: x@y"},
        headers=auth(tenant),
    )
    assert bad_to.status_code == 422
