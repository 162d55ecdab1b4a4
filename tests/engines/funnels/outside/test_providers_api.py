"""The providers API: per-workspace configuration of the outside actions, credentials stored
encrypted and never returned (PL-3), bad input refused with the field named, the organisation's
AI quota (PL-4) and the workspace's usage ledger."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select

from app.engines.funnels.outside import ai_ledger
from app.engines.funnels.outside.models import AiUsage
from app.integrations.http_guard import GUARD_RESOURCE, AddressGuard
from app.platform.models import Secret
from app.runtime import Runtime
from tests.platform.conftest import ApiTenant, create_api_tenant

BASE = "/api/v1/funnels"


@pytest.fixture
async def tenant(runtime: Runtime) -> ApiTenant:
    """A workspace reached by its API key only (no password hashing to wait for)."""
    return await create_api_tenant(runtime, "Acme")


@pytest.fixture
async def other_tenant(runtime: Runtime) -> ApiTenant:
    return await create_api_tenant(runtime, "Globex")


def auth(tenant: ApiTenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.api_key}"}


async def test_configure_list_and_remove_provider_never_returns_secret(
    client: httpx.AsyncClient, runtime: Runtime, tenant: ApiTenant
) -> None:
    """PL-3: the credential is stored encrypted and the API only says that one is stored."""
    put = await client.put(
        f"{BASE}/providers/sms",
        json={
            "shape": "twilio",
            "base_url": "https://api.twilio.example/",
            "options": {"account_sid": "AC123", "sender": "+15005550006"},
            "secret": "very-secret-token",
        },
        headers=auth(tenant),
    )
    assert put.status_code == 200, put.text
    assert "very-secret-token" not in put.text
    assert put.json()["has_secret"] is True
    assert put.json()["base_url"] == "https://api.twilio.example"
    listed = await client.get(f"{BASE}/providers", headers=auth(tenant))
    assert listed.status_code == 200
    assert "very-secret-token" not in listed.text
    assert [(p["kind"], p["shape"], p["has_secret"]) for p in listed.json()] == [
        ("sms", "twilio", True)
    ]
    async with runtime.db.read() as s:
        [ciphertext] = list(await s.scalars(select(Secret.ciphertext)))
    assert b"very-secret-token" not in ciphertext
    # Replacing the options keeps the stored credential when none is sent.
    again = await client.put(
        f"{BASE}/providers/sms",
        json={"shape": "json", "base_url": "https://sms.example", "options": {}},
        headers=auth(tenant),
    )
    assert again.status_code == 200, again.text
    assert again.json()["has_secret"] is True
    gone = await client.delete(f"{BASE}/providers/sms", headers=auth(tenant))
    assert gone.status_code == 204
    assert (await client.get(f"{BASE}/providers", headers=auth(tenant))).json() == []
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(Secret)) == 0


async def test_bad_provider_input_is_refused_naming_the_field(
    client: httpx.AsyncClient, tenant: ApiTenant
) -> None:
    cases = [
        ("sms", {"shape": "carrier-pigeon", "base_url": "https://x", "secret": "k"}, 422, "shape"),
        ("sms", {"shape": "json", "base_url": "ftp://x", "secret": "k"}, 422, "base_url"),
        ("sms", {"shape": "json", "base_url": "https://x"}, 422, "secret"),
        ("sms", {"shape": "twilio", "base_url": "https://x", "secret": "k"}, 422, "account_sid"),
        (
            "ai",
            {
                "shape": "openai",
                "base_url": "https://x",
                "secret": "k",
                "options": {"max_tokens": 0},
            },
            422,
            "options",
        ),
        ("http", {"shape": "guarded", "options": {"timeout_seconds": 600}}, 422, "options"),
        ("fax", {"shape": "json", "base_url": "https://x", "secret": "k"}, 404, ""),
        (
            "sms",
            {"shape": "json", "base_url": "https://x", "secret": "k", "extra": 1},
            422,
            "extra",
        ),
    ]
    for kind, body, status, field in cases:
        response = await client.put(f"{BASE}/providers/{kind}", json=body, headers=auth(tenant))
        assert response.status_code == status, (kind, body, response.text)
        assert "code" in response.json()
        assert field in response.text
    assert (await client.get(f"{BASE}/providers", headers=auth(tenant))).json() == []


async def test_providers_are_per_workspace(
    client: httpx.AsyncClient, tenant: ApiTenant, other_tenant: ApiTenant
) -> None:
    await client.put(
        f"{BASE}/providers/http",
        json={"shape": "guarded", "options": {"max_response_bytes": 1000}},
        headers=auth(tenant),
    )
    assert (await client.get(f"{BASE}/providers", headers=auth(other_tenant))).json() == []
    missing = await client.delete(f"{BASE}/providers/http", headers=auth(other_tenant))
    assert missing.status_code == 404
    [mine] = (await client.get(f"{BASE}/providers", headers=auth(tenant))).json()
    assert mine["options"] == {"timeout_seconds": 10.0, "max_response_bytes": 1000}
    assert mine["has_secret"] is False


async def test_ai_quota_and_usage(
    client: httpx.AsyncClient, runtime: Runtime, tenant: ApiTenant, other_tenant: ApiTenant
) -> None:
    """PL-4: the quota belongs to the organisation; usage lists this workspace's ledger, paged."""
    quota = await client.get(f"{BASE}/ai/quota", headers=auth(tenant))
    assert quota.status_code == 200
    assert quota.json()["used_tokens"] == 0
    assert quota.json()["period_start"].startswith("2026-03-01")
    # Setting the quota is organisation-level: an owner does it signed in, never a workspace key.
    refused = await client.put(
        f"{BASE}/ai/quota", json={"quota_tokens": 5000}, headers=auth(tenant)
    )
    assert refused.status_code == 403
    async with runtime.db.write() as uow:
        await ai_ledger.set_quota(uow.session, tenant.organisation_id, 5000, runtime.clock.now())
    changed = await client.get(f"{BASE}/ai/quota", headers=auth(tenant))
    assert changed.json() == {**quota.json(), "quota_tokens": 5000, "remaining_tokens": 5000}
    other = await client.get(f"{BASE}/ai/quota", headers=auth(other_tenant))
    assert other.json()["quota_tokens"] != 5000
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        uow.session.add_all(
            AiUsage(
                organisation_id=tenant.organisation_id,
                workspace_id=tenant.workspace_id,
                idempotency_key=f"run-1-step-{i}",
                outcome="generated",
                tokens=10 * i,
                model="gpt-4o-mini",
                detail="stop",
                at=now,
            )
            for i in range(3)
        )
    first = await client.get(f"{BASE}/ai/usage", params={"limit": 2}, headers=auth(tenant))
    assert [u["tokens"] for u in first.json()["items"]] == [20, 10]
    rest = await client.get(
        f"{BASE}/ai/usage",
        params={"limit": 2, "cursor": first.json()["next_cursor"]},
        headers=auth(tenant),
    )
    assert [u["tokens"] for u in rest.json()["items"]] == [0]
    assert (await client.get(f"{BASE}/ai/usage", headers=auth(other_tenant))).json()["items"] == []


@pytest.mark.parametrize(
    "base_url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::1]:9/",
        "http://localhost:9/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
async def test_a_private_base_url_is_refused_at_configuration(
    client: httpx.AsyncClient, runtime: Runtime, tenant: ApiTenant, base_url: str
) -> None:
    """SSRF: without the operator's OUTBOUND_ALLOW_PRIVATE a provider base URL inside the
    network is refused before it is stored, naming the field."""
    runtime.resources.put(GUARD_RESOURCE, AddressGuard())
    response = await client.put(
        f"{BASE}/providers/payments",
        json={"shape": "stripe", "base_url": base_url, "secret": "sk_live_x"},
        headers=auth(tenant),
    )
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "validation_failed"
    assert "base_url" in response.text
    assert (await client.get(f"{BASE}/providers", headers=auth(tenant))).json() == []
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(Secret)) == 0
