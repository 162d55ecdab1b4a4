"""FN-13a in the demo: the demo workspace is seeded with the SendGrid, Postmark and Mailgun
webhook secrets of the demo's provider simulators, so a report the mailbox page has a simulator
post about a received message is verified and applied like a real provider's."""

from __future__ import annotations

import html

import httpx
from sqlalchemy import select

from app.clock import SystemClock
from app.demo.funnels import PART
from app.demo.mail_reports import send_report
from app.demo.mailbox import PAGES as DEMO_PAGES
from app.demo.parts import DemoWorkspace
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.models import Contact
from app.platform.models import User
from app.sandbox.base import serve_in_loop
from app.web.app import create_app
from tests.engines.funnels.events.test_mail_reports import _first_message
from tests.engines.funnels.factories import Engine, settle
from tests.platform.conftest import csrf_from, sign_in


async def test_fn13a_demo_reports_from_each_provider_simulator_are_accepted(
    client, engine: Engine, tenant
) -> None:
    runtime = engine.runtime
    # The demo's simulators sign on the system clock, as the demo runs.
    engine.clock.set(SystemClock().now())
    ws = tenant.workspace_id
    await PART.seed(
        runtime, DemoWorkspace(organisation_id=0, workspace_id=ws, admin_user_id=0, sandbox_urls={})
    )
    person, message = await _first_message(runtime, tenant, engine, "reader@example.com")
    for provider in ("sendgrid", "postmark", "mailgun"):
        answer = await send_report(client, ws, provider, "opened", message)
        assert (answer["status"], answer["stored"]) == (200, 1), (provider, answer)
    answer = await send_report(client, ws, "postmark", "bounced", message)
    assert (answer["status"], answer["stored"]) == (200, 1)
    await settle(runtime)
    async with runtime.db.read() as s:
        found = await s.get(Contact, person)
        providers = sorted(e.payload["provider"] for e in await s.scalars(select(InboundEvent)))
    assert found is not None
    assert found.suppressed == {"email": "bounced"}
    assert providers == ["mailgun", "postmark", "postmark", "sendgrid"]


async def test_fn13a_demo_mailbox_page_reports_a_message_over_http(
    settings, engine: Engine, tenant
) -> None:
    """The mailbox page's Report button: the simulator's report reaches the app's receiver over
    HTTP (the app served on a loopback port) and the page says what the receiver answered."""
    runtime = engine.runtime
    engine.clock.set(SystemClock().now())
    ws = tenant.workspace_id
    async with runtime.db.write() as uow:
        user = await uow.session.get(User, tenant.user_id)
        assert user is not None
        user.email = runtime.settings.demo.admin_email
    await PART.seed(
        runtime, DemoWorkspace(organisation_id=0, workspace_id=ws, admin_user_id=0, sandbox_urls={})
    )
    person, message = await _first_message(runtime, tenant, engine, "reader@example.com")
    app = create_app(settings, runtime, background=False, extra_pages=DEMO_PAGES)
    async with serve_in_loop(app) as url, httpx.AsyncClient(base_url=url) as browser:
        signed_in = await sign_in(browser, runtime.settings.demo.admin_email, tenant.password)
        assert signed_in.status_code in (302, 303), signed_in.text
        page = await browser.get("/ui/funnels/mailbox")
        assert page.status_code == 200, page.text
        assert html.escape(message.message_id) in page.text
        reported = await browser.post(
            "/ui/funnels/mailbox/report",
            data={
                "_csrf_token": csrf_from(page.text),
                "message_id": message.message_id,
                "provider": "sendgrid",
                "kind": "complained",
            },
        )
        assert reported.status_code in (302, 303), reported.text
        shown = await browser.get(reported.headers["location"])
    assert "sendgrid reported complained: HTTP 200, stored 1" in shown.text
    await settle(runtime)
    async with runtime.db.read() as s:
        found = await s.get(Contact, person)
    assert found is not None
    assert found.suppressed == {"email": "complained"}
