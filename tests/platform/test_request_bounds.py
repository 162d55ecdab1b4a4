"""Every request's bounds: integers beyond 64 bits in paths (404) and queries (422) once the caller
is known (PL-10, tests/platform/test_id_bounds.py has the column ranges), NUL characters and JSON
nested too deep (422) before any handler — in the API's error format, never a 500, nothing
stored."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import auth
from tests.platform.conftest import ApiTenant

HUGE = str(2**64)


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/api-keys/{HUGE}",
        f"/api/v1/adrules/rules/{HUGE}",
        f"/api/v1/funnels/funnels/-{HUGE}",
        "/api/v1/api-keys/99999999999999999999999999999999",
    ],
)
async def test_a_path_integer_beyond_64_bits_is_404(
    client: httpx.AsyncClient, api_tenant: ApiTenant, path: str
) -> None:
    response = await client.get(path, headers=auth(api_tenant))
    assert response.status_code == 404, response.text
    assert response.json()["code"] == "not_found"


async def test_a_page_size_beyond_64_bits_is_422_naming_it(
    client: httpx.AsyncClient, api_tenant: ApiTenant
) -> None:
    response = await client.get(f"/api/v1/api-keys?limit={HUGE}", headers=auth(api_tenant))
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "validation_failed"
    assert [d["field"] for d in body["details"]] == ["limit"]


@pytest.mark.parametrize(
    "content",
    [
        b'{"name": "a\\u0000b"}',
        b'{"name": "a\x00b"}',
        b'{"name": ' + b"[" * 1000 + b"]" * 1000 + b"}",
    ],
    ids=["escaped-nul", "raw-nul", "deep"],
)
async def test_nul_and_deep_json_are_422_and_store_nothing(
    client: httpx.AsyncClient, api_tenant: ApiTenant, content: bytes
) -> None:
    headers = {**auth(api_tenant), "Content-Type": "application/json"}
    response = await client.post("/api/v1/api-keys", content=content, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "validation_failed"
    listed = await client.get("/api/v1/api-keys", headers=auth(api_tenant))
    assert len(listed.json()["items"]) == 1  # only the tenant's own key


async def test_a_nul_in_the_query_is_422(client: httpx.AsyncClient, api_tenant: ApiTenant) -> None:
    response = await client.get("/api/v1/api-keys?cursor=a%00b", headers=auth(api_tenant))
    assert response.status_code == 422
    assert response.json()["details"][0]["field"] == "cursor"


async def test_ordinary_requests_pass_unchanged(
    client: httpx.AsyncClient, api_tenant: ApiTenant
) -> None:
    created = await client.post("/api/v1/api-keys", json={"name": "ok"}, headers=auth(api_tenant))
    assert created.status_code == 201
    assert (
        await client.get("/api/v1/api-keys?limit=5", headers=auth(api_tenant))
    ).status_code == 200
