"""Server errors the schemathesis run found, each answered now in the error format."""

from __future__ import annotations

import asyncio
import gc
import re

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


async def test_options_allow_lists_the_methods_routed_on_each_path(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """PL-11: the ``Allow`` of an OPTIONS answer (and of a 405) names exactly the methods the
    document gives the path, besides OPTIONS and HEAD."""
    document = (await client.get("/schema/openapi.json")).json()
    wrong = []
    for path, operations in document["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "1", path)
        documented = {
            m.upper() for m in operations if m in ("get", "post", "put", "patch", "delete")
        }
        for method in ("OPTIONS", "TRACE"):
            response = await client.request(method, concrete, headers=auth(tenant))
            allow = {m.strip() for m in response.headers.get("allow", "").split(",") if m.strip()}
            if allow - {"OPTIONS", "HEAD"} != documented:
                wrong.append(
                    f"{method} {path}: Allow {sorted(allow)}, documented {sorted(documented)}"
                )
    assert not wrong, "\n".join(wrong)


async def test_a_request_a_dependency_refuses_leaves_no_session_to_the_finaliser(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """A page size refused (422) while the session dependency beside it was opened: the session
    was closed by two finalisers at once and the server logged "aclose(): asynchronous generator
    is already running" for each such request."""
    errors: list[str] = []
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(str(context.get("message"))))
    try:
        for _ in range(10):
            response = await client.get("/api/v1/api-keys?limit=0", headers=auth(tenant))
            assert response.status_code == 422
        gc.collect()
        await asyncio.sleep(0.05)
    finally:
        loop.set_exception_handler(previous)
    assert errors == []


async def test_a_decimal_is_documented_as_the_string_or_number_it_is_read_from(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """PL-11: ``POST /adrules/templates/{key}/rules`` took ``"amount": 5`` where the document
    allowed a string only; the document now says what the API reads."""
    document = (await client.get("/schema/openapi.json")).json()
    amount = document["components"]["schemas"]["TemplateParams"]["properties"]["amount"]
    assert {s.get("type") for s in amount["oneOf"]} == {"string", "number", "null"}
    hour = document["components"]["schemas"]["TemplateParams"]["properties"]["hour"]
    assert (hour["minimum"], hour["maximum"]) == (0, 23)  # a zero bound was left out
    created = await client.post(
        "/api/v1/adrules/templates/night_budget_reset/rules",
        json={"params": {"amount": 5}},
        headers=auth(tenant),
    )
    assert created.status_code == 201, created.text
