"""Idempotency-Key on POST /api/v1/api-keys (and the reusable helper behind it)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.clock import ManualClock
from app.db.session import UnitOfWork
from app.errors import ValidationFailed
from app.platform import idempotency
from app.platform.models import ApiKey, IdempotencyRecord
from app.runtime import Runtime
from tests.conftest import auth
from tests.platform.conftest import ApiTenant, create_api_tenant

Tenant = ApiTenant


@pytest.fixture
def tenant(api_tenant: ApiTenant) -> ApiTenant:
    """These tests act through an API key only."""
    return api_tenant


@pytest.fixture
async def other_tenant(runtime: Runtime) -> ApiTenant:
    return await create_api_tenant(runtime, "Umbrella")


async def key_count(runtime: Runtime, tenant: Tenant) -> int:
    async with runtime.db.read() as session:
        n = await session.scalar(
            select(func.count())
            .select_from(ApiKey)
            .where(ApiKey.workspace_id == tenant.workspace_id)
        )
    return int(n or 0)


def with_key(tenant: Tenant, key: str) -> dict[str, str]:
    return {**auth(tenant), "Idempotency-Key": key}


async def test_same_key_and_body_replays_the_first_answer(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    first = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "k-1")
    )
    assert first.status_code == 201
    assert "idempotent-replayed" not in first.headers
    again = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "k-1")
    )
    assert again.status_code == 201
    assert again.json() == first.json()  # the same key id and the same raw key
    assert again.headers["idempotent-replayed"] == "true"
    assert await key_count(runtime, tenant) == 2  # the fixture's key and one new key


async def test_body_is_compared_canonically(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = {**with_key(tenant, "k-2"), "content-type": "application/json"}
    first = await client.post("/api/v1/api-keys", content=b'{"name":"zap"}', headers=headers)
    again = await client.post("/api/v1/api-keys", content=b'{ "name" : "zap" }\n', headers=headers)
    assert again.json() == first.json()
    assert await key_count(runtime, tenant) == 2


async def test_same_key_with_another_body_is_409(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await client.post("/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "k-3"))
    r = await client.post(
        "/api/v1/api-keys", json={"name": "other"}, headers=with_key(tenant, "k-3")
    )
    assert r.status_code == 409
    assert r.json()["code"] == "idempotency_key_reused"
    assert await key_count(runtime, tenant) == 2


async def test_without_a_key_every_request_creates(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    for _ in range(2):
        assert (
            await client.post("/api/v1/api-keys", json={"name": "zap"}, headers=auth(tenant))
        ).status_code == 201
    assert await key_count(runtime, tenant) == 3


async def test_keys_are_per_workspace(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    a = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "shared")
    )
    b = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(other_tenant, "shared")
    )
    assert a.status_code == b.status_code == 201
    assert a.json()["id"] != b.json()["id"]
    assert "idempotent-replayed" not in b.headers


async def test_failed_request_stores_nothing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    r = await client.post("/api/v1/api-keys", json={"name": ""}, headers=with_key(tenant, "k-4"))
    assert r.status_code == 422
    r = await client.post("/api/v1/api-keys", json={"name": "ok"}, headers=with_key(tenant, "k-4"))
    assert r.status_code == 201
    assert "idempotent-replayed" not in r.headers


@pytest.mark.parametrize("bad", ["", "has space", "x" * 256])
async def test_malformed_key_is_422(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, bad: str
) -> None:
    r = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers={**auth(tenant), "Idempotency-Key": bad}
    )
    assert r.status_code == 422
    assert r.json()["details"][0]["field"] == "Idempotency-Key"
    assert await key_count(runtime, tenant) == 1


async def test_concurrent_retries_create_one_key(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    responses = await asyncio.gather(
        *(
            client.post(
                "/api/v1/api-keys", json={"name": "race"}, headers=with_key(tenant, "race-1")
            )
            for _ in range(6)
        )
    )
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["key"] for r in responses}) == 1
    assert await key_count(runtime, tenant) == 2


async def test_stored_answer_expires_after_the_ttl(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    first = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "k-5")
    )
    clock.advance(runtime.settings.web.idempotency_ttl_hours * 3600 - 1)
    assert (
        await client.post("/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "k-5"))
    ).json() == first.json()
    clock.advance(2)
    later = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "k-5")
    )
    assert later.status_code == 201
    assert later.json()["id"] != first.json()["id"]
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(IdempotencyRecord)) == 1


async def test_helper_runs_an_action_once(runtime: Runtime, tenant: Tenant) -> None:
    """The platform helper engines use: the action runs once, its answer is replayed."""
    calls: list[int] = []

    async def action(uow: UnitOfWork) -> dict[str, Any]:
        calls.append(1)
        return {"n": len(calls)}

    kwargs: dict[str, Any] = {
        "workspace_id": tenant.workspace_id,
        "principal": "api_key:1",
        "key": "job-7",
        "request_hash": idempotency.fingerprint("POST", "/x", b'{"a":1}'),
        "now": runtime.clock.now(),
        "ttl": timedelta(hours=1),
        "status_code": 202,
        "action": action,
    }
    first = await idempotency.run_once(runtime.db, runtime.secrets, **kwargs)
    second = await idempotency.run_once(runtime.db, runtime.secrets, **kwargs)
    assert (first.status_code, first.body, first.replayed) == (202, b'{"n":1}', False)
    assert (second.status_code, second.body, second.replayed) == (202, b'{"n":1}', True)
    assert calls == [1]


def test_fingerprint_separates_method_path_and_body() -> None:
    fp = idempotency.fingerprint
    assert fp("POST", "/a", b'{"x":1,"y":2}') == fp("post", "/a", b'{"y":2, "x":1}')
    assert fp("POST", "/a", b"{}") != fp("PUT", "/a", b"{}")
    assert fp("POST", "/a", b"{}") != fp("POST", "/b", b"{}")
    assert fp("POST", "/a", b"not json") != fp("POST", "/a", b"not json!")


def test_validate_key() -> None:
    assert idempotency.validate_key("0b7c4f0e-9d5e-4c8a-bb1c-3f0a8f1e2d3c")
    with pytest.raises(ValidationFailed):
        idempotency.validate_key("a b")


async def test_another_key_replaying_an_idempotency_key_gets_no_raw_key(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """Idempotency answers are the principal's own: a second API key of the same workspace that
    sends the first key's Idempotency-Key starts its own request and never sees the first raw
    key; the stored answer holds no raw key in clear."""
    first = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "shared-1")
    )
    assert first.status_code == 201
    raw = first.json()["key"]
    other_key = {"Authorization": f"Bearer {raw}", "Idempotency-Key": "shared-1"}
    second = await client.post("/api/v1/api-keys", json={"name": "zap"}, headers=other_key)
    assert second.status_code == 201
    assert "Idempotent-Replayed" not in second.headers
    assert raw not in second.text
    assert second.json()["id"] != first.json()["id"]
    # The first key's own retry is still answered from the store.
    again = await client.post(
        "/api/v1/api-keys", json={"name": "zap"}, headers=with_key(tenant, "shared-1")
    )
    assert again.json() == first.json()
    async with runtime.db.read() as session:
        rows = list(await session.scalars(select(IdempotencyRecord)))
    assert len(rows) == 2
    for row in rows:
        assert raw.encode() not in row.response_body
        assert b"shared-1" not in row.key.encode()
