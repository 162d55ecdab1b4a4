"""A fresh instance without the demo, taken into use in a real browser: the setup page refuses a
wrong token and creates the owner with the right one, then is gone; the owner signs in, creates a
workspace and invites a member; the invitation mail arrives at a real SMTP server; the member
accepts through the link, signs in, and is refused an organisation-level action (403). The two
first-run pages pass the same accessibility and layout audit as every other page."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.clock import ManualClock
from app.db.session import Database
from app.platform import setup
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.sandbox.smtp import SmtpSink
from app.settings import Settings
from app.web.app import create_app
from app.wiring import assemble
from tests.conftest import truncate_all
from tests.e2e.conftest import sign_in
from tests.e2e.test_every_page_browser import AXE, WIDTHS, audit_page

pytestmark = pytest.mark.browser

OWNER = "owner@fresh.test"
MEMBER = "new.member@fresh.test"


@dataclasses.dataclass
class Fresh:
    url: str
    runtime: Runtime
    sink: SmtpSink


@pytest.fixture
async def fresh(
    settings: Settings, shared_db: Database, clock: ManualClock
) -> AsyncIterator[Fresh]:
    """An instance with no one in it, mailing through a real SMTP server."""
    with SmtpSink() as sink:
        mail = dataclasses.replace(settings.mail, smtp_host=sink.host, smtp_port=sink.port)
        runtime = assemble(dataclasses.replace(settings, mail=mail), clock, db=shared_db)
        try:
            async with runtime.db.read() as session:
                assert await setup.needs_setup(session)
            app = create_app(runtime.settings, runtime, background=False)
            async with serve_in_loop(app) as url:
                yield Fresh(url, runtime, sink)
        finally:
            await runtime.queue.aclose()
            await truncate_all(shared_db)


async def test_setup_owner_workspace_invitation_and_a_members_limits(
    browser: Any, fresh: Fresh
) -> None:
    url, runtime = fresh.url, fresh.runtime
    context = await browser.new_context()
    await context.add_init_script(path=str(AXE))
    page = await context.new_page()

    # Nobody can sign in yet: the sign-in page leads to the setup page, which passes the audit.
    await page.goto(f"{url}/login")
    await page.wait_for_url(f"{url}/setup")
    for width in WIDTHS:
        assert await audit_page(page, f"{url}/setup", width) == []
    await page.set_viewport_size({"width": 1280, "height": 800})

    # A wrong setup token is refused, and what was typed (but secrets) stays in the form.
    await page.fill("#setup-token", "swsetup_not-the-token")
    await page.fill("#setup-organisation", "Fresh Co")
    await page.fill("#setup-workspace", "Main")
    await page.fill("#setup-name", "Olive Owner")
    await page.fill("#setup-email", OWNER)
    await page.fill("#setup-password", "owner password 1")
    async with page.expect_response(
        lambda r: r.url == f"{url}/setup" and r.request.method == "POST"
    ) as refused:
        await page.click("#setup-form button[type=submit]")
    assert (await refused.value).status == 403
    assert "not the setup token" in await page.locator("#setup-token-error").inner_text()
    assert await page.input_value("#setup-organisation") == "Fresh Co"
    async with runtime.db.read() as session:
        assert await setup.needs_setup(session)

    # The right token creates the organisation, its workspace and the owner, signed in.
    await page.fill("#setup-token", setup.setup_token(runtime.session_secret))
    await page.fill("#setup-password", "owner password 1")
    await page.click("#setup-form button[type=submit]")
    await page.wait_for_url(f"{url}/")
    gone = await page.goto(f"{url}/setup")
    assert gone is not None
    assert gone.status == 404

    # The owner signs out and in again through the sign-in form.
    await page.goto(f"{url}/")
    await page.click("form.logout button")
    await page.wait_for_url(f"{url}/login")
    await sign_in(page, url, OWNER, "owner password 1")

    # A second workspace, then an invitation to it.
    await page.goto(f"{url}/ui/organisation")
    await page.fill("#new-workspace-name", "Second")
    await page.click("#create-workspace button[type=submit]")
    assert "Second" in await page.locator("#new-workspace").inner_text()
    assert (await page.locator("#new-workspace-signing-secret").inner_text()).strip()
    await page.fill("#invite-email", MEMBER)
    await page.select_option("#invite-workspace", label="Second")
    await page.select_option("#invite-role", "member")
    await page.click("#invite-form button[type=submit]")
    shown = (await page.locator("#new-invitation-link").inner_text()).strip()
    assert "was mailed" in await page.locator("#new-invitation").inner_text()

    # The mail arrived at the SMTP server (it is sent before the page answers), same link.
    [mail] = [m for m in fresh.sink.messages if MEMBER in m.to]
    assert "Second" in mail.subject
    [link] = re.findall(r"https?://\S+/invite/\S+", mail.body)
    assert link == shown
    path = urlsplit(link).path

    # The member accepts through the link and is signed in; the link works once.
    member_context = await browser.new_context()
    await member_context.add_init_script(path=str(AXE))
    member = await member_context.new_page()
    for width in WIDTHS:
        assert await audit_page(member, f"{url}{path}", width) == []
    await member.set_viewport_size({"width": 1280, "height": 800})
    await member.fill("#accept-name", "Nia Member")
    await member.fill("#accept-password", "member password 1")
    await member.click("#accept-form button[type=submit]")
    await member.wait_for_url(f"{url}/")
    again = await member.goto(f"{url}{path}")
    assert again is not None
    assert again.status == 404

    # Signed in again as themselves, they work in their workspace but not on the organisation.
    await member.goto(f"{url}/")
    await member.click("form.logout button")
    await sign_in(member, url, MEMBER, "member password 1")
    assert "Organisation" not in await member.locator("header").inner_text()
    refused_page = await member.goto(f"{url}/ui/organisation")
    assert refused_page is not None
    assert refused_page.status == 403
    topup = await member.request.post(
        f"{url}/ui/ranktracking/balance/top-ups",
        form={"amount_eur": "10"},
        headers={"x-csrf-token": await _csrf(member)},
    )
    assert topup.status == 403
    await member_context.close()
    await context.close()


async def _csrf(page: Any) -> str:
    cookies = await page.context.cookies()
    return next(c["value"] for c in cookies if c["name"] == "swl_csrf")
