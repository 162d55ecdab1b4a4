"""Work in progress refreshes in place: a funnel's runs table polls itself while a run is active
and not otherwise; the part it polls answers the same table."""

from __future__ import annotations

import httpx

from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.definitions import service
from app.engines.funnels.events.claim.triggers import enroll
from app.runtime import Runtime
from tests.factories import Tenant
from tests.platform.conftest import sign_in

GRAPH = {
    "triggers": [{"kind": "manual"}],
    "nodes": [{"kind": "wait", "id": "w", "entry": True, "days": 3}],
}


async def test_the_runs_table_polls_while_a_run_is_active(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        funnel = await service.create_funnel(
            uow.session, tenant.workspace_id, "Live", service.parse_definition(GRAPH), now
        )
    await sign_in(client, tenant.email, tenant.password)
    part = f"/ui/funnels/{funnel.id}/partials/runs"
    idle = await client.get(f"/ui/funnels/{funnel.id}")
    assert idle.status_code == 200
    assert f'hx-get="{part}"' not in idle.text

    async with runtime.db.write() as uow:
        version = await service.publish(
            uow.session, tenant.workspace_id, funnel.id, user_id=None, now=now
        )
        contact = await create_contact(
            uow.session, tenant.workspace_id, ContactData(email="ada@x.test"), now
        )
        assert await enroll(uow.session, version, now=now, contact_ids=[contact.id]) == 1
    busy = await client.get(f"/ui/funnels/{funnel.id}")
    assert f'hx-get="{part}"' in busy.text
    fragment = await client.get(part)
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    assert 'id="runs-card"' in fragment.text
    assert f'hx-get="{part}"' in fragment.text
    assert "active" in fragment.text
