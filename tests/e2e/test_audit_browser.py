"""The audit page in a real headless Chromium (issue 31, item 1; PL-1: owners and admins): what
callers control ends up in the log (their user agent, names and values of settings, an object's
name) and in the filters echoed back, and none of it runs as script on the page; the entries are
shown as text. (The page is also in the every-page crawl: tests/e2e/test_every_page_browser.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.platform import audit
from app.runtime import Runtime
from tests.conftest import auth
from tests.e2e.page_errors import watch_errors
from tests.factories import Tenant

pytestmark = pytest.mark.browser

SCRIPT = "<script>window.__xss=1</script>"
IMAGE = "<img src=x onerror=window.__xss=2>"
SVG = "<svg onload=window.__xss=3>"
QUOTE = "\"'><script>window.__xss=4</script>"


async def test_stored_and_reflected_markup_on_the_audit_page_does_not_run(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    # A caller's user agent, through a real request.
    async with httpx.AsyncClient(base_url=live_url) as http:
        r = await http.put(
            "/api/v1/secrets/smtp",
            json={"value": "x" * 12},
            headers={**auth(tenant), "User-Agent": IMAGE},
        )
        assert r.status_code == 200, r.text
    # Values a person typed, as an action with before/after records them.
    async with runtime.db.write() as uow:
        await audit.record(
            uow.session,
            action="workspace.renamed",
            object_type="workspace",
            object_id=SVG,
            workspace_id=tenant.workspace_id,
            before={"name": SCRIPT},
            after={"name": QUOTE},
            now=runtime.clock.now(),
            actor=audit.Actor("user", tenant.user_id),
        )
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    errors = watch_errors(page)

    await page.goto(f"{live_url}/ui/organisation/audit")
    table = await page.locator("#audit-entries").inner_text()
    for text in (IMAGE, SVG, "window.__xss=1", "window.__xss=4"):
        assert text in table, text
    assert (
        await page.locator("#audit-entries img, #audit-entries svg, script:not([src])").count() == 0
    )
    assert await page.evaluate("() => window.__xss") is None

    # Filters are echoed back into the form (and a bad one into the error) as text.
    for value in (QUOTE, IMAGE):
        await page.goto(f"{live_url}/ui/organisation/audit?action={value}&actor={value}")
        assert await page.locator("#audit-action").input_value() == value
        assert await page.evaluate("() => window.__xss") is None
    assert dialogs == []
    # The 422 of the bad actor filter is the browser's only complaint.
    assert [e for e in errors if "status of 422" not in e] == []
