"""The instance's machinery — sweepers, the job queue, dead jobs and their errors — is shared by
every organisation on the instance: its operators (owners and admins of the first organisation,
the one set up with the instance) see it; another organisation's owner sees only their own
workspace's activity on the operations page, and the machinery's partial refuses them."""

from __future__ import annotations

import httpx

from app.runtime import Runtime
from tests.factories import Tenant, create_tenant
from tests.platform.conftest import sign_in


async def test_the_first_organisations_owner_sees_the_queue_and_the_sweepers(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await create_tenant(runtime, name="Globex")
    await sign_in(client, tenant.email, tenant.password)
    page = await client.get("/ui/operations")
    assert page.status_code == 200
    assert 'id="status"' in page.text
    partial = await client.get("/ui/partials/status", headers={"HX-Request": "true"})
    assert partial.status_code == 200


async def test_another_organisations_owner_sees_only_their_activity(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    globex = await create_tenant(runtime, name="Globex")
    await sign_in(client, globex.email, globex.password)
    page = await client.get("/ui/operations")
    assert page.status_code == 200
    assert 'id="status"' not in page.text
    assert 'id="activity"' in page.text
    assert "shown to its operators only" in page.text
    partial = await client.get("/ui/partials/status", headers={"HX-Request": "true"})
    assert partial.status_code == 403
