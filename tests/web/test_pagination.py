"""Every list pages the same way (issue 12, item 5): one ``cursor`` and one ``limit`` rule, checked
before the handler runs, refused in the same words by every list of the API and the dashboard."""

from __future__ import annotations

import re

import httpx
import pytest

from app.db import keyset
from app.engines.funnels.campaigns.models import Recipient
from app.pagination import (
    CURSOR_PROBLEM,
    Paging,
    cursor_number,
    limit_problem,
    page_of,
)
from tests.conftest import auth
from tests.engines.funnels.factories import contact, setup_names
from tests.factories import Tenant
from tests.platform.conftest import sign_in

_PATH_PARAMETER = re.compile(r"\{[^}]+\}")


async def _list_operations(
    client: httpx.AsyncClient, *, paged: bool = False
) -> list[tuple[str, int]]:
    """The API's GET operations that take ``limit`` (``paged``: and ``cursor``), with the page
    size each serves at most."""
    document = (await client.get("/schema/openapi.json")).json()
    lists = []
    for path, methods in document["paths"].items():
        query = {
            p["name"]: p for p in methods.get("get", {}).get("parameters", []) if p["in"] == "query"
        }
        if "limit" in query and ("cursor" in query or not paged):
            lists.append((_PATH_PARAMETER.sub("1", path), query["limit"]["schema"]["maximum"]))
    return lists


async def test_every_list_documents_cursor_and_limit_with_their_bounds(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    assert len(await _list_operations(client, paged=True)) >= 12
    for path, methods in document["paths"].items():
        parameters = {p["name"]: p for p in methods.get("get", {}).get("parameters", [])}
        if "limit" in parameters:
            assert parameters["limit"]["schema"]["minimum"] == 1, path
            assert parameters["limit"]["required"] is False, path
        if "cursor" in parameters:
            assert parameters["cursor"]["required"] is False, path


@pytest.mark.parametrize("cursor", ["abc", "-1", "³", "1.5"])
async def test_every_list_refuses_a_cursor_it_did_not_return_in_the_same_words(
    client: httpx.AsyncClient, tenant: Tenant, cursor: str
) -> None:
    for path, _ in await _list_operations(client, paged=True):
        r = await client.get(path, params={"cursor": cursor}, headers=auth(tenant))
        assert r.status_code == 422, (path, r.text)
        assert r.json()["details"][0]["field"] == "cursor", path
        assert r.json()["details"][0]["message"] == CURSOR_PROBLEM, path


async def test_every_list_refuses_a_page_size_out_of_its_bounds_in_the_same_words(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    for path, maximum in await _list_operations(client):
        for limit in (0, maximum + 1):
            r = await client.get(path, params={"limit": limit}, headers=auth(tenant))
            assert r.status_code == 422, (path, r.text)
            detail = r.json()["details"][0]
            assert detail == {
                "field": "limit",
                "message": limit_problem(maximum),
                "code": "invalid",
            }, path


async def test_a_dashboard_list_refuses_a_foreign_cursor_like_the_api(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    assert (await client.get("/ui/adrules/log")).status_code == 200
    r = await client.get("/ui/adrules/log?cursor=abc", headers={"accept": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["details"][0]["message"] == CURSOR_PROBLEM


def test_a_page_says_where_the_next_one_starts_only_when_there_is_more() -> None:
    paging = Paging.of("41", 2)
    assert paging.after == 41
    assert paging.fetch == 3
    full = page_of([{"id": 40}, {"id": 39}, {"id": 38}], paging.limit, lambda row: row["id"])
    assert full.items == [{"id": 40}, {"id": 39}]
    assert full.next_cursor == "39"
    last = page_of([{"id": 40}], paging.limit, lambda row: row["id"])
    assert last.next_cursor is None
    assert cursor_number("") is None
    assert cursor_number(None) is None


async def test_a_cursor_past_its_columns_range_pages_like_any_other_number(
    client: httpx.AsyncClient, runtime, tenant: Tenant
) -> None:
    """The recipients list pages on a 32-bit ``seq``: a cursor beyond it is an empty page after
    it (PostgreSQL refused to bind it: a 500), and beyond 64 bits no list can have returned it."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["news"])
    for i in range(2):
        await contact(runtime, ws, f"c{i}@example.com", tags=["news"])
    created = await client.post(
        "/api/v1/funnels/campaigns",
        json={
            "name": "n",
            "subject": "s",
            "body": "b",
            "audience": {"kind": "has_tag", "tag": "news"},
        },
        headers=auth(tenant),
    )
    assert created.status_code == 201, created.text
    campaign = created.json()["id"]
    snapshot = await client.post(
        f"/api/v1/funnels/campaigns/{campaign}/audience", headers=auth(tenant)
    )
    assert snapshot.status_code == 200, snapshot.text
    path = f"/api/v1/funnels/campaigns/{campaign}/recipients"
    first = await client.get(path, params={"limit": 1}, headers=auth(tenant))
    assert first.json()["next_cursor"] == "1"
    for cursor in (str(2**31 - 1), str(2**31), str(2**63 - 1)):
        r = await client.get(path, params={"cursor": cursor}, headers=auth(tenant))
        assert r.status_code == 200, (cursor, r.text)
        assert r.json() == {"items": [], "next_cursor": None}
    r = await client.get(path, params={"cursor": str(2**63)}, headers=auth(tenant))
    assert r.status_code == 422, r.text
    assert r.json()["details"][0]["message"] == CURSOR_PROBLEM


@pytest.mark.parametrize("cursor", [str(2**31), str(2**63 - 1)])
async def test_every_list_answers_a_cursor_at_the_edge_of_64_bits_without_a_server_error(
    client: httpx.AsyncClient, tenant: Tenant, cursor: str
) -> None:
    for path, _ in await _list_operations(client, paged=True):
        r = await client.get(path, params={"cursor": cursor}, headers=auth(tenant))
        assert r.status_code in (200, 404), (path, r.text)


def test_a_keyset_condition_is_settled_without_the_database_past_the_columns_range() -> None:
    seq = Recipient.__table__.c.seq
    assert str(keyset.after(seq, 2**31 - 1)) == "false"
    assert str(keyset.before(seq, 2**31)) == "true"
    assert str(keyset.after(seq, 5)) == "campaign_recipients.seq > :seq_1"
    assert str(keyset.before(seq, 2**31 - 1)) == "campaign_recipients.seq < :seq_1"
