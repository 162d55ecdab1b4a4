"""AR-45 the workspace's time zone is set over the API (``PATCH /api/v1/workspace``) and on the
workspace settings page by its admins, checked against the IANA zone names: a name that is not one
is a 422 naming ``timezone`` in plain words, and nothing changes. Each change is audited."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from app.platform.audit.models import AuditEntry
from app.runtime import Runtime
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.conftest import post_form, sign_in


async def test_ar45_the_api_sets_the_workspace_zone(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    r = await client.patch(
        "/api/v1/workspace", json={"timezone": "Asia/Jakarta"}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    assert r.json()["timezone"] == "Asia/Jakarta"
    assert (await client.get("/api/v1/workspace", headers=auth(tenant))).json()[
        "timezone"
    ] == "Asia/Jakarta"
    # Name and zone together; the name alone still renames.
    both = await client.patch(
        "/api/v1/workspace",
        json={"name": "Acme EU", "timezone": "Europe/Berlin"},
        headers=auth(tenant),
    )
    assert (both.json()["name"], both.json()["timezone"]) == ("Acme EU", "Europe/Berlin")
    renamed = await client.patch("/api/v1/workspace", json={"name": "Acme"}, headers=auth(tenant))
    assert (renamed.json()["name"], renamed.json()["timezone"]) == ("Acme", "Europe/Berlin")
    async with runtime.db.read() as session:
        entry = await session.scalar(
            select(AuditEntry)
            .where(AuditEntry.action == "workspace.timezone_changed")
            .order_by(AuditEntry.id.desc())
        )
    assert entry is not None
    assert (entry.before, entry.after) == (
        {"timezone": "Asia/Jakarta"},
        {"timezone": "Europe/Berlin"},
    )


async def test_ar45_a_name_that_is_not_an_iana_zone_is_refused_naming_the_field(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    before = (await client.get("/api/v1/workspace", headers=auth(tenant))).json()
    for bad in ("Mars/Olympus", "GMT+7", "berlin", "Europe/Berlin/Mitte"):
        r = await client.patch("/api/v1/workspace", json={"timezone": bad}, headers=auth(tenant))
        assert r.status_code == 422, bad
        assert "timezone" in r.text
        assert "is not an IANA time zone name" in r.text
    empty = await client.patch("/api/v1/workspace", json={}, headers=auth(tenant))
    assert empty.status_code == 422
    assert "time zone" in empty.text
    # A refused zone with a valid name renames nothing either.
    half = await client.patch(
        "/api/v1/workspace", json={"name": "Renamed", "timezone": "Nowhere"}, headers=auth(tenant)
    )
    assert half.status_code == 422
    ws = (await client.get("/api/v1/workspace", headers=auth(tenant))).json()
    assert (ws["name"], ws["timezone"]) == (before["name"], "UTC")


async def test_ar45_the_settings_page_shows_and_sets_the_zone(
    new_client: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)
    page = await browser.get("/ui/workspace")
    assert '<strong id="workspace-zone">UTC</strong>' in page.text
    assert '<option value="America/New_York">' in page.text

    r = await post_form(browser, "/ui/workspace", "/ui/workspace/timezone", timezone="Nowhere/City")
    assert r.status_code == 422
    assert "is not an IANA time zone name" in r.text
    assert 'value="Nowhere/City"' in r.text  # what was typed stays in the field

    r = await post_form(
        browser, "/ui/workspace", "/ui/workspace/timezone", timezone="America/New_York"
    )
    assert r.status_code in (302, 303)
    page = await browser.get("/ui/workspace")
    assert '<strong id="workspace-zone">America/New_York</strong>' in page.text
    ws = (await client.get("/api/v1/workspace", headers=auth(tenant))).json()
    assert ws["timezone"] == "America/New_York"


async def test_ar45_a_member_cannot_change_the_zone(new_client: Any, tenant: Tenant) -> None:
    browser = await new_client()
    await sign_in(browser, tenant.member_email, tenant.member_password)
    page = await browser.get("/ui/workspace")
    assert 'id="set-timezone"' not in page.text
    r = await post_form(browser, "/ui/workspace", "/ui/workspace/timezone", timezone="Asia/Tokyo")
    assert r.status_code == 403
