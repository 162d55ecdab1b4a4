"""The organisation page's forms: a refused form is shown again with the reason next to it and
nothing written; an accepted one is shown with what it created (the request's one transaction)."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from app.platform.models import Membership, Workspace
from app.runtime import Runtime
from tests.factories import Tenant
from tests.platform.conftest import post_form, sign_in

ORG_PAGE = "/ui/organisation"


async def _workspaces(runtime: Runtime, organisation_id: int) -> list[str]:
    async with runtime.db.read() as session:
        names = await session.scalars(
            select(Workspace.name)
            .where(Workspace.organisation_id == organisation_id)
            .order_by(Workspace.id)
        )
        return list(names)


async def test_a_refused_workspace_name_is_shown_next_to_the_field_and_nothing_is_created(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    refused = await post_form(client, ORG_PAGE, f"{ORG_PAGE}/workspaces", name="x" * 201)
    assert refused.status_code == 422
    assert 'class="field-error" role="alert">name: must be 1 to 200 characters' in refused.text
    assert "Acme main" in refused.text  # the page around the form is still there
    assert await _workspaces(runtime, tenant.organisation_id) == ["Acme main"]

    created = await post_form(client, ORG_PAGE, f"{ORG_PAGE}/workspaces", name="Acme labs")
    assert created.status_code == 200
    assert "Acme labs" in created.text
    assert await _workspaces(runtime, tenant.organisation_id) == ["Acme main", "Acme labs"]


async def test_removing_oneself_is_refused_on_the_page_and_the_person_stays(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    refused = await post_form(client, ORG_PAGE, f"{ORG_PAGE}/people/{tenant.user_id}/remove")
    assert refused.status_code == 409
    assert "you cannot remove yourself" in refused.text
    assert tenant.member_email in refused.text
    async with runtime.db.read() as session:
        memberships = await session.scalar(
            select(func.count()).where(Membership.user_id == tenant.user_id)
        )
    assert memberships == 1
    # The session still works: the refusal rolled back nothing of it.
    assert (await client.get(ORG_PAGE)).status_code == 200
