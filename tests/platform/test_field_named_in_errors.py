"""A field the API refuses is named in the error's ``details`` (platform spec, API conventions:
per-field details for validation errors; PL-11, a contract a generated client can act on): an
e-mail address that is not one names ``email``, as a value of the wrong type does, not ``""``."""

from __future__ import annotations

import httpx

from app.web.errors import _field_details
from tests.conftest import auth
from tests.factories import Tenant


async def test_an_invalid_email_address_names_the_email_field_pl11(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.post(
        "/api/v1/funnels/contacts", json={"email": "not-an-email"}, headers=auth(tenant)
    )
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "validation_failed"
    [detail] = body["details"]
    assert detail["field"] == "email"
    assert detail["source"] == "body"
    assert detail["message"].startswith("is not a valid e-mail address")
    assert body["message"].startswith("Email: is not a valid e-mail address")
    wrong_type = await client.post(
        "/api/v1/funnels/contacts", json={"email": 5}, headers=auth(tenant)
    )
    assert wrong_type.json()["details"][0]["field"] == "email"


def test_a_struct_check_inside_another_names_the_whole_path_pl11() -> None:
    """A struct's own check reported by msgspec at a nested struct: its path, then the field."""
    extra = [
        {
            "message": "`email` is not a valid e-mail address - at `$.contacts[2]`",
            "key": "data",
            "source": "body",
        }
    ]
    assert _field_details(extra) == [
        {
            "field": "contacts[2].email",
            "message": "is not a valid e-mail address",
            "source": "body",
        }
    ]
