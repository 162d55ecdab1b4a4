"""The Funnels dashboard in a real headless Chromium: create a funnel, edit its graph as JSON and
see the validator's problems per node, get publishing refused, fix and publish, read versions,
runs with their steps and a contact's timeline."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.definitions.service import current_version, list_funnels
from app.engines.funnels.events.claim.triggers import enroll
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import EmailChannel
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.work.runner import Runner
from app.integrations.mail import MailSender
from app.runtime import Runtime
from app.sandbox.smtp import SmtpSink
from app.settings import FunnelSettings, MailSettings
from tests.e2e.conftest import sign_in
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def open_json(page: Any) -> None:
    """The graph's JSON is the editor's advanced view, folded away under the canvas."""
    await page.locator("#advanced").evaluate("d => { d.open = true; }")


BROKEN = {
    "triggers": [{"kind": "manual"}],
    "nodes": [
        {
            "kind": "send_email",
            "id": "hello",
            "entry": True,
            "subject": "Hi {{frist_name}}",
            "body": "",
            "next": "w",
        },
        {"kind": "wait", "id": "w", "days": 1},
        {"kind": "send_email", "id": "orphan", "subject": "x", "body": "y"},
    ],
}
FIXED: dict[str, Any] = {
    "triggers": [{"kind": "manual"}],
    "nodes": [
        {
            "kind": "send_email",
            "id": "hello",
            "entry": True,
            "subject": "Hi {{first_name}}",
            "body": "Welcome aboard",
            "next": "w",
        },
        {"kind": "wait", "id": "w", "days": 1},
    ],
}


async def test_edit_validate_publish_and_follow_a_run(
    page: Any, live_url: str, tenant: Tenant, runtime: Runtime
) -> None:
    await sign_in(page, live_url, tenant.email, tenant.password)
    await page.click("nav >> text=Funnels")
    await page.wait_for_url(f"{live_url}/ui/funnels")
    await page.fill("#new-funnel input[name=name]", "Welcome")
    await page.click("#new-funnel button[type=submit]")
    await page.wait_for_selector("#draft-form")

    # Not JSON: shown again with the message, nothing stored.
    await open_json(page)
    await page.fill("#definition", "{ not json")
    await page.click("#save")
    assert "not valid JSON" in await page.locator("#error").inner_text()
    assert await page.locator("#definition").input_value() == "{ not json"

    # Valid JSON, invalid graph: problems listed per node with their rule.
    await open_json(page)
    await page.fill("#definition", json.dumps(BROKEN))
    await page.click("#save")
    await page.wait_for_selector("#notice")
    problems = page.locator("#problems tr.problem")
    nodes_rules = {
        (
            await problems.nth(i).get_attribute("data-node"),
            (await problems.nth(i).locator("td").nth(1).inner_text()),
        )
        for i in range(await problems.count())
    }
    assert {("hello", "FN-24"), ("hello", "FN-25"), ("orphan", "FN-22")} <= nodes_rules
    assert await page.locator('.node-bad[data-node="hello"]').count() == 1
    assert await page.locator('.node-ok[data-node="w"]').count() == 1

    await page.click("#publish")
    assert "Not published" in await page.locator("#error").inner_text()
    assert "Not published yet" in await page.locator("#versions").inner_text()

    await open_json(page)
    await page.fill("#definition", json.dumps(FIXED))
    await page.click("#save")
    await page.wait_for_selector("#valid")
    await page.click("#publish")
    assert "Published version 1" in await page.locator("#notice").inner_text()
    await page.click("#versions >> text=Version 1")
    assert "Welcome aboard" in await page.locator("#version-definition").inner_text()

    # A contact goes through; the run, its steps and the timeline show it, the mail arrives.
    with SmtpSink() as sink:
        now = runtime.clock.now()
        async with runtime.db.write() as uow:
            contact = await create_contact(
                uow.session,
                tenant.workspace_id,
                ContactData(email="ada@example.com", first_name="Ada"),
                now,
            )
            [funnel] = await list_funnels(uow.session, tenant.workspace_id)
            version = await current_version(uow.session, funnel)
            await enroll(uow.session, version, now=now, contact_ids=[contact.id])
        await Runner(
            runtime.db, FunnelSettings(), mail_domain="x.test", executors=EXECUTORS
        ).run_batch(owner="t", now=now)
        mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port)
        email = EmailChannel(
            MailSender(mail),
            signing=WorkspaceTracking(
                runtime.db, runtime.secrets, runtime.settings.web.public_url, runtime.clock
            ),
        )
        await Deliverer(runtime.db, FunnelSettings(), lambda c: email).run_batch(
            owner="t", now=runtime.clock.now
        )

        await page.goto(f"{live_url}/ui/funnels/{funnel.id}")
        await page.click("#runs >> text=#")
        assert await page.locator("#run-status").inner_text() == "active"
        steps = await page.locator("#steps").inner_text()
        assert "hello" in steps
        assert "until" in steps
        assert "sent" in await page.locator("#effects").inner_text()

        await page.goto(f"{live_url}/ui/funnels/contacts")
        await page.click("#contacts >> text=ada@example.com")
        timeline = await page.locator("#timeline").inner_text()
        assert "contact_created" in timeline
        assert "send_email hello" in timeline

        assert any("Hi Ada" in f"{m.subject} {m.body}" for m in sink.messages)
