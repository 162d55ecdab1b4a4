"""Server errors the schemathesis run found, each answered now in the error format."""

from __future__ import annotations

import httpx

from tests.conftest import auth
from tests.factories import Tenant


async def test_account_ids_beyond_64_bits_are_refused(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.post(
        "/api/v1/adrules/templates/pause_losers/rules",
        json={"account_ids": [14929009567459826726540231531560960, -4097]},
        headers=auth(tenant),
    )
    assert response.status_code == 422, response.text
