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


async def test_a_contact_taking_another_contacts_address_is_a_409(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """The error message read the contact after the failed flush had expired it (a 500)."""
    first = await client.post(
        "/api/v1/funnels/contacts", json={"email": "grace@example.com"}, headers=auth(tenant)
    )
    second = await client.post(
        "/api/v1/funnels/contacts", json={"email": "ada@example.com"}, headers=auth(tenant)
    )
    assert (first.status_code, second.status_code) == (201, 201)
    taken = await client.patch(
        f"/api/v1/funnels/contacts/{second.json()['id']}",
        json={"first_name": "Grace", "email": "grace@example.com"},
        headers=auth(tenant),
    )
    assert taken.status_code == 409, taken.text
    assert taken.json()["code"] == "duplicate_contact"


async def test_a_meta_token_a_header_cannot_carry_is_refused_when_set(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """A token with a line break or a non-ASCII character reached the Authorization header of
    the Graph call, whose encoding failed (a 500 on discovery and preview)."""
    for bad in ("EAAB-token\nX-Injected: 1", "EAAB-tokén-ünicode"):
        response = await client.put(
            "/api/v1/adrules/meta-token", json={"token": bad}, headers=auth(tenant)
        )
        assert response.status_code == 422, response.text


async def test_a_cursor_of_non_ascii_digits_is_a_422(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.get("/api/v1/funnels/inbound?cursor=%C2%B3", headers=auth(tenant))
    assert response.status_code == 422, response.text
