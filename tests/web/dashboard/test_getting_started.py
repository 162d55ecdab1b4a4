"""The home page's getting-started steps are ticked from the workspace's real state, each
engine's own reads answering for it; another workspace's state ticks nothing here."""

from __future__ import annotations

from app.engines.adrules import accounts
from app.engines.funnels.contacts import store
from app.platform.service import Principal
from app.runtime import Runtime
from app.web.dashboard.getting_started import journeys
from tests.factories import Tenant


async def _done(runtime: Runtime, tenant: Tenant) -> dict[str, list[bool]]:
    principal = Principal(
        workspace_id=tenant.workspace_id, organisation_id=tenant.organisation_id, role="admin"
    )
    async with runtime.db.read() as session:
        return {j.engine: [s.done for s in j.steps] for j in await journeys(session, principal)}


async def test_steps_are_ticked_from_what_the_workspace_did(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    nothing = {
        "Ad rules": [False, False, False, False],
        "Funnels": [False, False],
        "Position tracking": [False, False, False],
    }
    assert await _done(runtime, tenant) == nothing

    async with runtime.db.write() as uow:
        now = runtime.clock.now()
        await accounts.store_token(
            uow.session, runtime.secrets, workspace_id=tenant.workspace_id, token="t" * 20, now=now
        )
        await store.create_contact(
            uow.session, tenant.workspace_id, store.ContactData(email="ada@example.com"), now
        )
    assert await _done(runtime, tenant) == {
        **nothing,
        "Ad rules": [True, False, False, False],
        "Funnels": [True, False],
    }
    assert await _done(runtime, other_tenant) == nothing
