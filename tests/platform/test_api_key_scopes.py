"""PL-2 API keys carry a scope and may expire: a ``read`` key reads and is refused every change
(403); an expired key is refused outright (401); the webhook signing secret can be rotated and is
shown once."""

from __future__ import annotations

from datetime import timedelta

import httpx

from app.clock import ManualClock
from app.platform import service
from app.runtime import Runtime
from tests.conftest import auth
from tests.factories import Tenant


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_read_key_reads_and_is_refused_on_writes(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    created = await client.post(
        "/api/v1/api-keys", json={"name": "dashboards", "scope": "read"}, headers=auth(tenant)
    )
    assert created.status_code == 201
    assert created.json()["scope"] == "read"
    key = created.json()["key"]

    assert (await client.get("/api/v1/workspace", headers=bearer(key))).status_code == 200
    assert (await client.get("/api/v1/ranktracking/lists", headers=bearer(key))).status_code == 200
    for method, path, body in [
        ("POST", "/api/v1/ranktracking/lists", {"name": "x", "keywords": ["a"]}),
        ("PUT", "/api/v1/secrets/smtp", {"value": "pw"}),
        ("PATCH", "/api/v1/workspace", {"name": "renamed"}),
        ("DELETE", f"/api/v1/api-keys/{created.json()['id']}", None),
    ]:
        r = await client.request(method, path, json=body, headers=bearer(key))
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["code"] == "forbidden"
    # Nothing was changed by the refused calls.
    assert (await client.get("/api/v1/ranktracking/lists", headers=auth(tenant))).json() == []
    assert (await client.get("/api/v1/workspace", headers=auth(tenant))).json()["name"] != (
        "renamed"
    )


async def test_an_expired_key_is_refused(
    client: httpx.AsyncClient, runtime: Runtime, clock: ManualClock, tenant: Tenant
) -> None:
    async with runtime.db.write() as uow:
        _, raw = await service.create_api_key(
            uow.session,
            workspace_id=tenant.workspace_id,
            name="temporary",
            now=clock.now(),
            expires_at=clock.now() + timedelta(hours=1),
        )
    assert (await client.get("/api/v1/workspace", headers=bearer(raw))).status_code == 200
    clock.advance(3601)
    r = await client.get("/api/v1/workspace", headers=bearer(raw))
    assert r.status_code == 401
    assert "expired" in r.json()["message"]
    listed = (await client.get("/api/v1/api-keys", headers=auth(tenant))).json()["items"]
    assert any(k["name"] == "temporary" and k["expires_at"] for k in listed)


async def test_an_expiry_in_the_past_is_refused_at_creation(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    r = await client.post(
        "/api/v1/api-keys",
        json={"name": "late", "expires_at": "2020-01-01T00:00:00Z"},
        headers=auth(tenant),
    )
    assert r.status_code == 422
    assert r.json()["details"][0]["field"] == "expires_at"


async def test_the_signing_secret_is_rotated_and_shown_once(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    async with runtime.db.read() as session:
        before = service.webhook_secret(
            runtime.secrets, await service.get_workspace(session, tenant.workspace_id)
        )
    r = await client.post("/api/v1/webhook-secret/rotate", headers=auth(tenant))
    assert r.status_code == 201
    new = r.json()["webhook_secret"]
    async with runtime.db.read() as session:
        after = service.webhook_secret(
            runtime.secrets, await service.get_workspace(session, tenant.workspace_id)
        )
    assert after == new
    assert after != before
    workspace = (await client.get("/api/v1/workspace", headers=auth(tenant))).text
    assert new not in workspace


async def test_a_key_cannot_revoke_itself_but_may_revoke_another(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """PL-2: DELETE /api-keys/{id} with the key it names answers 409 ``own_key`` and the key
    goes on working; the same key revokes another key of its workspace."""
    created = await client.post("/api/v1/api-keys", json={"name": "robot"}, headers=auth(tenant))
    assert created.status_code == 201
    robot = created.json()
    own = await client.delete(f"/api/v1/api-keys/{robot['id']}", headers=bearer(robot["key"]))
    assert own.status_code == 409, own.text
    assert own.json()["code"] == "own_key"
    assert (await client.get("/api/v1/workspace", headers=bearer(robot["key"]))).status_code == 200

    listed = (await client.get("/api/v1/api-keys", headers=auth(tenant))).json()["items"]
    original = next(k for k in listed if k["id"] != robot["id"])
    other = await client.delete(f"/api/v1/api-keys/{original['id']}", headers=bearer(robot["key"]))
    assert other.status_code == 204, other.text
    assert (await client.get("/api/v1/workspace", headers=auth(tenant))).status_code == 401
