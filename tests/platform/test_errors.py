"""One JSON error format ``{code, message, details}`` for every 4xx, never a stack trace; bad input
changes nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.platform import service
from app.runtime import Runtime
from tests.conftest import auth
from tests.harness.app_client import asgi_transport
from tests.platform.conftest import ApiTenant

Tenant = ApiTenant


@pytest.fixture
def tenant(api_tenant: ApiTenant) -> ApiTenant:
    """These tests act through an API key only."""
    return api_tenant


def assert_error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == code
    assert body["message"]
    assert "Traceback" not in r.text
    assert 'File "' not in r.text
    return body


async def key_names(runtime: Runtime, tenant: Tenant) -> list[str]:
    async with runtime.db.read() as session:
        return [k.name for k in await service.list_api_keys(session, tenant.workspace_id, limit=50)]


async def test_malformed_json_is_400(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    r = await client.post(
        "/api/v1/api-keys",
        content=b'{"name": "ci",',
        headers={**auth(tenant), "content-type": "application/json"},
    )
    assert_error(r, 400, "malformed_body")
    assert await key_names(runtime, tenant) == ["tests"]


async def test_body_that_is_not_utf8_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.post(
        "/api/v1/api-keys",
        content=b'{"name": "\xff"}',
        headers={**auth(tenant), "content-type": "application/json"},
    )
    assert_error(r, 400, "malformed_body")


async def test_missing_body_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.post(
        "/api/v1/api-keys", headers={**auth(tenant), "content-type": "application/json"}
    )
    assert_error(r, 400, "body_required")


async def test_unknown_field_is_422_and_named(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    r = await client.post(
        "/api/v1/api-keys", json={"name": "ci", "scopes": ["all"]}, headers=auth(tenant)
    )
    body = assert_error(r, 422, "validation_failed")
    assert body["details"][0]["field"] == "scopes"
    assert "unknown field" in body["details"][0]["message"]
    assert await key_names(runtime, tenant) == ["tests"]


async def test_wrong_type_is_422_and_named(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.post("/api/v1/api-keys", json={"name": 42}, headers=auth(tenant))
    body = assert_error(r, 422, "validation_failed")
    assert body["details"] == [{"field": "name", "message": "enter text", "source": "body"}]


async def test_wrong_top_level_type_is_422(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.post("/api/v1/api-keys", json=["name"], headers=auth(tenant))
    assert_error(r, 422, "validation_failed")


@pytest.mark.parametrize("name", ["", "x" * 201])
async def test_out_of_range_value_is_422(
    client: httpx.AsyncClient, tenant: Tenant, name: str
) -> None:
    r = await client.post("/api/v1/api-keys", json={"name": name}, headers=auth(tenant))
    body = assert_error(r, 422, "validation_failed")
    assert body["details"][0]["field"] == "name"


async def test_invalid_enum_value_is_422(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.post(
        "/api/v1/members",
        json={"email": "new@acme.test", "role": "owner", "password": "long enough pw"},
        headers=auth(tenant),
    )
    body = assert_error(r, 422, "validation_failed")
    assert body["details"][0]["field"] == "role"


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "limit=many", "cursor=abc", "cursor=-1"])
async def test_bad_paging_parameters_are_422(
    client: httpx.AsyncClient, tenant: Tenant, query: str
) -> None:
    r = await client.get(f"/api/v1/api-keys?{query}", headers=auth(tenant))
    body = assert_error(r, 422, "validation_failed")
    assert body["details"][0]["field"] in {"limit", "cursor"}


async def test_oversized_body_is_413(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    limit = runtime.settings.web.max_body_bytes
    r = await client.put(
        "/api/v1/secrets/big",
        content=b'{"value": "' + b"x" * (limit + 10) + b'"}',
        headers={**auth(tenant), "content-type": "application/json"},
    )
    body = assert_error(r, 413, "body_too_large")
    assert str(limit) in body["message"]
    async with runtime.db.read() as session:
        assert await service.secret_names(session, tenant.workspace_id) == []


async def test_unknown_route_is_404(client: httpx.AsyncClient, tenant: Tenant) -> None:
    assert_error(await client.get("/api/v1/no-such-thing", headers=auth(tenant)), 404, "not_found")
    assert_error(await client.get("/nothing-here"), 404, "not_found")


async def test_wrong_method_is_405(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.patch("/api/v1/api-keys", json={}, headers=auth(tenant))
    assert_error(r, 405, "method_not_allowed")


async def test_unauthenticated_is_401(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/api/v1/api-keys"), 401, "unauthorized")


async def test_conflict_is_409(client: httpx.AsyncClient, tenant: Tenant) -> None:
    keyword_list = {"name": "Shoes", "keywords": ["blue shoes"]}
    path = "/api/v1/ranktracking/lists"
    assert (await client.post(path, json=keyword_list, headers=auth(tenant))).status_code == 201
    r = await client.post(path, json=keyword_list, headers=auth(tenant))
    assert_error(r, 409, "list_name_taken")


async def test_organisation_level_action_with_a_workspace_key_is_403(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    person = {"email": "pat@initech.test", "role": "member", "password": "long enough pw"}
    r = await client.post("/api/v1/members", json=person, headers=auth(tenant))
    assert_error(r, 403, "forbidden")


async def test_forged_form_is_403(client: httpx.AsyncClient) -> None:
    assert_error(await client.post("/logout"), 403, "csrf_failed")


async def test_unexpected_error_is_500_without_details(caplog: pytest.LogCaptureFixture) -> None:
    """An exception nobody expected answers the generic 500 body; the trace goes to the log only."""
    from litestar import Litestar, get

    from app.web.errors import EXCEPTION_HANDLERS

    @get("/boom", sync_to_thread=False)
    def boom() -> None:
        raise RuntimeError("db password=hunter2 at /srv/app/secret.py")

    app = Litestar([boom], exception_handlers=EXCEPTION_HANDLERS, logging_config=None)
    async with httpx.AsyncClient(transport=asgi_transport(app), base_url="http://t") as c:
        r = await c.get("/boom")
    body = assert_error(r, 500, "server_error")
    assert body["message"] == "The server could not complete the request."
    assert "hunter2" not in r.text
    assert "RuntimeError" in caplog.text


async def test_browser_gets_the_error_as_a_page(client: httpx.AsyncClient) -> None:
    r = await client.get("/nothing-here", headers={"accept": "text/html"})
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert 'data-code="not_found"' in r.text
    # Programs asking the API for HTML still get JSON.
    r = await client.get("/api/v1/x", headers={"accept": "text/html"})
    assert r.headers["content-type"].startswith("application/json")
