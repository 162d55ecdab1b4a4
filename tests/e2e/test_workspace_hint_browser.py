"""A link into another of the person's workspaces (PL-1): the 404 page names the workspace that
holds the object and switches into it in one click; an object of a workspace the person is not a
member of reads like one that does not exist. The header offers the workspace switch on every
page once the person has more than one workspace."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from playwright.async_api import expect

from app.platform import service
from app.runtime import Runtime
from tests.engines.ranktracking.factories import make_list
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def _second_workspace(runtime: Runtime, tenant: Tenant) -> Tenant:
    """A second workspace of the tenant's organisation, its admin a member of it too."""
    async with runtime.db.write() as uow:
        second = await service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=tenant.organisation_id,
            name="Acme second",
            now=runtime.clock.now(),
        )
        await service.add_member(
            uow.session, user_id=tenant.user_id, workspace_id=second.workspace.id, role="member"
        )
    return dataclasses.replace(tenant, workspace_id=second.workspace.id)


def _csp_errors(page: Any) -> list[str]:
    errors: list[str] = []
    page.on(
        "console",
        lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return errors


async def test_pl1_a_link_into_another_of_my_workspaces_offers_the_switch(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """PL-1: the 404 names the person's workspace holding the list; one click switches into it
    and opens the list."""
    page = signed_in_page
    csp = _csp_errors(page)
    second = await _second_workspace(runtime, tenant)
    theirs = await make_list(runtime, second, ["trail shoes"], name="Second's gear")

    response = await page.goto(f"{live_url}/ui/ranktracking/lists/{theirs.id}")
    assert response is not None
    assert response.status == 404
    switch = page.locator("#workspace-hint-switch")
    await expect(switch).to_be_visible()
    assert await page.locator("#workspace-hint-name").inner_text() == "Acme second"
    await switch.locator("button").click()
    await page.wait_for_url(f"{live_url}/ui/ranktracking/lists/{theirs.id}")
    await expect(page.locator("main")).to_contain_text("Second's gear")
    # The header's switch now shows the workspace switched into.
    header = page.locator("#header-switch-workspace select")
    assert await header.locator("option:checked").inner_text() == "Acme second"
    assert csp == []


async def test_pl1_a_link_into_a_workspace_i_do_not_belong_to_names_nothing(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """PL-1: another tenant's list answers the plain "not found in this workspace", word for word
    the answer for an id nobody holds; the other tenant's workspace is never named."""
    page = signed_in_page
    await _second_workspace(runtime, tenant)
    foreign = await make_list(runtime, other_tenant, ["rain jacket"], name="Globex gear")

    texts = []
    for list_id in (foreign.id, foreign.id + 10_000):
        response = await page.goto(f"{live_url}/ui/ranktracking/lists/{list_id}")
        assert response is not None
        assert response.status == 404
        await expect(page.locator("#workspace-hint[data-checked]")).to_have_count(1)
        none = page.locator("#workspace-hint-none")
        await expect(none).to_contain_text("Not found in this workspace")
        await expect(page.locator("#workspace-hint-switch")).to_have_count(0)
        body = await page.locator("body").inner_text()
        assert "Globex" not in body
        texts.append(await page.locator("#error").inner_text())
    assert texts[0] == texts[1]
    # The header lists the person's own workspaces only.
    options = await page.locator("#header-switch-workspace option").all_inner_texts()
    assert sorted(options) == ["Acme main", "Acme second"]


async def test_pl1_the_header_switches_workspace_from_any_page(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    """PL-1: with two workspaces every page's header has the switch; it lands on the same
    section in the workspace chosen."""
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels")
    await expect(page.locator("#header-switch-workspace")).to_have_count(0)  # one workspace
    await _second_workspace(runtime, tenant)
    await page.goto(f"{live_url}/ui/ranktracking/lists")
    header = page.locator("#header-switch-workspace")
    await expect(header).to_be_visible()
    await header.locator("select").select_option(label="Acme second")
    await header.locator("button").click()
    await page.wait_for_url(f"{live_url}/ui/ranktracking/lists")
    assert await header.locator("option:checked").inner_text() == "Acme second"
    await page.goto(f"{live_url}/")
    await expect(page.locator("h1")).to_have_text("Acme second")
