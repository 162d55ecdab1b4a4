"""Settings pages: a workspace member sees the secrets' names and the providers but may change
neither (PL-3: values never come out); an admin may."""

from __future__ import annotations

import httpx

from app.runtime import Runtime
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in


async def test_a_member_reads_settings_but_cannot_change_them(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await sign_in(client, tenant.member_email, tenant.member_password)
    secrets = await client.get("/ui/workspace/secrets")
    assert secrets.status_code == 200
    assert 'id="secret-form"' not in secrets.text
    providers = await client.get("/ui/workspace/providers")
    assert providers.status_code == 200
    assert 'id="provider-form-sms"' not in providers.text
    token = csrf_from(secrets.text)
    refused = await client.post(
        "/ui/workspace/secrets", data={"_csrf_token": token, "name": "x", "value": "y"}
    )
    assert refused.status_code == 403
    refused = await client.post(
        "/ui/workspace/providers/sms",
        data={"_csrf_token": token, "shape": "json", "base_url": "https://sms.example"},
    )
    assert refused.status_code == 403


async def test_an_unknown_provider_kind_is_not_found(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get("/ui/workspace/providers")).text)
    answer = await client.post(
        "/ui/workspace/providers/fax", data={"_csrf_token": token, "shape": "json"}
    )
    assert answer.status_code == 404
