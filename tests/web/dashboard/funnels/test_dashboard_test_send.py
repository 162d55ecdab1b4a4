"""Test send from the dashboard's funnel editor (issue 19 item 6): the editor offers the draft's
e-mail nodes; a test goes to the chosen address with the chosen contact's variables, marked as a
test, and counts nowhere (no run, step, outbox row or delivery record); bad input is shown on the
page, nothing sent."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from app.engines.funnels.models import DeliveryEvent, OutboxEffect, Run, Step
from app.integrations.mail import MailSender
from app.runtime import Runtime
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings
from tests.engines.funnels.factories import (
    contact,
    email_node,
    graph,
    published,
    replace_funnels_deps,
)
from tests.factories import Tenant


async def _count(runtime: Runtime, model: object) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(model)) or 0)  # type: ignore[arg-type]


async def test_the_editor_sends_a_test_counted_nowhere(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sink: SmtpSink
) -> None:
    from tests.platform.conftest import csrf_from, sign_in

    ws = tenant.workspace_id
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            email_node("hello", subject="Hi {{first_name}}", body="Dear {{first_name}}.", next="w"),
            {"kind": "wait", "id": "w", "days": 1, "next": "later"},
            email_node("later", subject="Later"),
            triggers=[{"kind": "manual"}],
        ),
    )
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    await contact(runtime, ws, "bounced@example.com", suppressed={"email": "bounced"})
    mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="f@test.example")
    replace_funnels_deps(runtime, trial_mail=MailSender(mail))
    await sign_in(client, tenant.email, tenant.password)

    editor = await client.get(f"/ui/funnels/{funnel_id}")
    assert editor.status_code == 200
    assert 'id="test-send-form"' in editor.text
    assert '<option value="hello">hello</option>' in editor.text
    assert '<option value="later">later</option>' in editor.text
    assert '<option value="w">' not in editor.text
    token = csrf_from(editor.text)

    sent = await client.post(
        f"/ui/funnels/{funnel_id}/test-send",
        data={
            "_csrf_token": token,
            "node_id": "hello",
            "to": "boss@example.com",
            "contact_id": str(ann),
            "source": "published",
        },
    )
    assert sent.status_code in (302, 303), sent.text
    shown = await client.get(sent.headers["location"])
    assert "Test sent to boss@example.com: [Test] Hi Ann" in shown.text
    [message] = sink.snapshot()
    assert message.to == ["boss@example.com"]
    assert message.subject == "[Test] Hi Ann"
    assert message.body.startswith("Dear Ann.")
    assert message.headers["X-Sweepline-Test"] == "1"
    for model in (Run, Step, OutboxEffect, DeliveryEvent):
        assert await _count(runtime, model) == 0

    # Bad input is shown on the editor; nothing goes out.
    for form, said in (
        ({"node_id": "hello", "to": "not-an-address"}, "Test not sent: to: an e-mail address"),
        ({"node_id": "w", "to": "boss@example.com"}, "no send_email node &#39;w&#39;"),
        ({"node_id": "hello", "to": "b@example.com", "contact_id": "x"}, "a contact id"),
        ({"node_id": "hello", "to": "b@example.com", "contact_id": "999999"}, "Test not sent"),
        # FN-31: the consent gate refuses an address the workspace must not mail.
        (
            {"node_id": "hello", "to": "Bounced@Example.com"},
            "Test not sent: to: Bounced@Example.com must not be mailed (suppressed on email: bounced)",
        ),
    ):
        refused = await client.post(
            f"/ui/funnels/{funnel_id}/test-send", data={"_csrf_token": token, **form}
        )
        assert refused.status_code == 200, refused.text
        assert said in refused.text
    assert len(sink.snapshot()) == 1
