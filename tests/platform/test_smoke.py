from __future__ import annotations

import httpx

from tests.conftest import auth
from tests.factories import Tenant


async def test_health_and_ready(client: httpx.AsyncClient) -> None:
    assert (await client.get("/health")).json() == {"status": "ok"}
    ready = (await client.get("/ready")).json()
    assert ready["database"] is True
    assert ready["queue"] is True


async def test_workspace_of_the_api_key(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.get("/api/v1/workspace", headers=auth(tenant))
    assert r.status_code == 200
    assert r.json()["id"] == tenant.workspace_id
