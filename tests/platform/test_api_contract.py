"""The API's contract is true (issue 13, item 5): the OpenAPI document gives every operation the
statuses it answers with the project's error body, and the answers match it — a missing query
parameter is a field-level 422, a unique index refusing a write is a 409 in the error format."""

from __future__ import annotations

import sqlite3

import httpx
from litestar import Litestar, get
from litestar.testing import AsyncTestClient
from sqlalchemy.exc import IntegrityError

from app.web.errors import EXCEPTION_HANDLERS
from tests.conftest import auth
from tests.factories import Tenant


async def test_every_api_operation_documents_its_errors_with_the_error_body(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    body = document["components"]["schemas"]["ErrorBody"]
    assert set(body["required"]) == {"code", "message", "details"}
    operations = 0
    for path, methods in document["paths"].items():
        if not path.startswith("/api/"):
            continue
        for method, operation in methods.items():
            operations += 1
            responses = operation["responses"]
            for status in ("400", "401", "403", "404", "409", "422", "429", "503"):
                assert status in responses, (method, path, status)
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == error_ref, (method, path, status)
            if method in ("post", "put", "patch"):
                assert "413" in responses, (method, path)
            # Both causes of a 503, each with the code a client tells them apart by.
            unavailable = responses["503"]["description"]
            assert "``database_busy``" in unavailable, (method, path)
            assert "``queue_unavailable``" in unavailable, (method, path)
            assert "job queue (Redis) is not reachable" in unavailable, (method, path)
    assert operations > 100


async def test_an_error_answer_matches_the_documented_body(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    for response in (
        await client.get("/api/v1/jobs"),  # 401
        await client.get("/api/v1/jobs/12345", headers=auth(tenant)),  # 404
        await client.get("/api/v1/jobs?limit=abc", headers=auth(tenant)),  # 422
        await client.post(
            "/api/v1/funnels/contacts",
            content=b"{",
            headers={**auth(tenant), "content-type": "application/json"},
        ),  # 400
    ):
        assert response.status_code >= 400
        assert set(response.json()) == {"code", "message", "details"}, response.text


async def test_a_missing_query_parameter_is_a_field_level_422(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.get("/api/v1/ranktracking/schedules/1/history", headers=auth(tenant))
    assert response.status_code == 422
    assert response.json()["code"] == "validation_failed"
    assert response.json()["details"] == [
        {"field": "keyword", "message": "is required", "source": "query"}
    ]


@get("/conflict", sync_to_thread=False)
def _conflicting() -> None:
    raise IntegrityError(
        "UPDATE lists", {}, sqlite3.IntegrityError("UNIQUE constraint failed: lists.name")
    )


@get("/broken", sync_to_thread=False)
def _broken() -> None:
    raise IntegrityError(
        "INSERT", {}, sqlite3.IntegrityError("NOT NULL constraint failed: lists.name")
    )


async def test_a_unique_index_refusing_a_write_is_a_409() -> None:
    """The audit's list rename whose check missed the index (``Ölist`` vs ``ölist``) was a 500."""
    app = Litestar([_conflicting, _broken], exception_handlers=EXCEPTION_HANDLERS)
    async with AsyncTestClient(app) as c:
        conflict = await c.get("/conflict")
        assert conflict.status_code == 409
        assert conflict.json()["code"] == "conflict"
        assert "UNIQUE" not in conflict.text  # the database's words stay in the log
        other = await c.get("/broken")
        assert other.status_code == 500


async def test_objects_that_refuse_unknown_fields_say_so_in_the_document(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """Every request and response struct refuses unknown fields, and its schema says so with
    ``additionalProperties: false``; a struct that takes any field (the error body's ``details``
    entries are plain objects) stays open. What the document says is what the API does."""
    document = (await client.get("/schema/openapi.json")).json()
    schemas = document["components"]["schemas"]
    name_in = schemas["NameIn"]  # the body of POST /api/v1/funnels/tags
    assert name_in["additionalProperties"] is False
    assert "additionalProperties" not in schemas["ErrorBody"]
    closed = [s for s in schemas.values() if s.get("additionalProperties") is False]
    assert len(closed) > 50
    response = await client.post(
        "/api/v1/funnels/tags", json={"name": "vip", "colour": "red"}, headers=auth(tenant)
    )
    assert 400 <= response.status_code < 500
    assert "colour" in response.text
