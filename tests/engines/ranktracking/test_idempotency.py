"""``Idempotency-Key`` on the position tracking requests an outside system may retry: the same key
and body answer the first response again with one effect; the same key with another body is 409."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import func, select

from app.engines.ranktracking.models import KeywordList, ListKeyword, Request, Schedule
from app.runtime import Runtime
from tests.conftest import auth
from tests.engines.ranktracking.factories import fund
from tests.engines.ranktracking.test_api import serp_body
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


def _keyed(tenant: Tenant, key: str) -> dict[str, str]:
    return {**auth(tenant), "Idempotency-Key": key}


async def _count(runtime: Runtime, model: Any, *where: Any) -> int:
    async with runtime.db.read() as session:
        return int(await session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


async def _twice_then_reused(
    client: httpx.AsyncClient,
    tenant: Tenant,
    path: str,
    body: dict[str, Any],
    other: dict[str, Any],
    *,
    key: str,
    status: int,
) -> dict[str, Any]:
    """First request, its retry (the stored answer, replayed) and a different body (409)."""
    first = await client.post(f"{BASE}{path}", json=body, headers=_keyed(tenant, key))
    assert first.status_code == status, first.text
    assert "idempotent-replayed" not in first.headers
    retry = await client.post(f"{BASE}{path}", json=body, headers=_keyed(tenant, key))
    assert retry.status_code == status
    assert retry.json() == first.json()
    assert retry.headers["idempotent-replayed"] == "true"
    reused = await client.post(f"{BASE}{path}", json=other, headers=_keyed(tenant, key))
    assert reused.status_code == 409, reused.text
    assert reused.json()["code"] == "idempotency_key_reused"
    result: dict[str, Any] = first.json()
    return result


async def test_create_list_and_add_keywords_are_idempotent(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    created = await _twice_then_reused(
        client,
        tenant,
        "/lists",
        {"name": "Main", "keywords": ["red shoes"]},
        {"name": "Other", "keywords": ["red shoes"]},
        key="list-1",
        status=201,
    )
    assert await _count(runtime, KeywordList, KeywordList.workspace_id == tenant.workspace_id) == 1
    list_id = created["list"]["id"]

    added = await _twice_then_reused(
        client,
        tenant,
        f"/lists/{list_id}/keywords",
        {"keywords": ["blue shoes"]},
        {"keywords": ["green shoes"]},
        key="add-1",
        status=201,
    )
    # The retry answers the first report ("added"), not "already there".
    assert added["added"] == ["blue shoes"]
    imported = await _twice_then_reused(
        client,
        tenant,
        f"/lists/{list_id}/import",
        {"text": "green shoes\n"},
        {"text": "pink shoes\n"},
        key="import-1",
        status=201,
    )
    assert imported["added"] == ["green shoes"]
    assert await _count(runtime, ListKeyword, ListKeyword.list_id == list_id) == 3


async def test_create_schedule_is_idempotent(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """One schedule and one baseline request, however often the creation is retried (RT-27)."""
    body = serp_body(keywords=["red shoes"])
    created = await _twice_then_reused(
        client,
        tenant,
        "/schedules",
        body,
        serp_body(keywords=["blue shoes"]),
        key="schedule-1",
        status=201,
    )
    assert created["baseline"]["reason"] == "balance"
    assert await _count(runtime, Schedule, Schedule.workspace_id == tenant.workspace_id) == 1
    assert await _count(runtime, Request, Request.schedule_id == created["schedule"]["id"]) == 1


async def test_run_now_top_up_are_idempotent(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """RT-25/RT-26: a retried "run now" launches once."""
    await fund(runtime, tenant, 1000)

    r = await client.post(
        f"{BASE}/schedules", json=serp_body(keywords=["red shoes"]), headers=auth(tenant)
    )
    schedule_id = r.json()["schedule"]["id"]
    assert r.json()["baseline"]["launched"] == 2
    # End the baseline's runs so that a manual request can be admitted.
    r = await client.post(f"{BASE}/schedules/{schedule_id}/pause", headers=auth(tenant))
    assert r.status_code == 200
    r = await client.post(f"{BASE}/schedules/{schedule_id}/resume", headers=auth(tenant))
    assert r.status_code == 200

    launch = await _twice_then_reused(
        client,
        tenant,
        f"/schedules/{schedule_id}/run",
        {"queue": "priority"},
        {"queue": "standard"},
        key="run-1",
        status=200,
    )
    assert launch["launched"] == 2
    assert await _count(runtime, Request, Request.schedule_id == schedule_id) == 2
    # Without the key a second request is a new request (refused: a run is active).
    r = await client.post(
        f"{BASE}/schedules/{schedule_id}/run", json={"queue": "priority"}, headers=auth(tenant)
    )
    assert (r.status_code, r.json()["reason"]) == (200, "active_run")


async def test_concurrent_retries_with_one_key_create_once(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """Five copies of one keyed list creation sent at once create one list and answer the same."""
    responses = await asyncio.gather(
        *(
            client.post(
                f"{BASE}/lists",
                json={"name": "burst", "keywords": ["a", "b"]},
                headers=_keyed(tenant, "burst"),
            )
            for _ in range(5)
        )
    )
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["list"]["id"] for r in responses}) == 1
    assert await _count(runtime, KeywordList, KeywordList.workspace_id == tenant.workspace_id) == 1


async def test_failed_keyed_request_stores_nothing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """A refused request (another workspace's list: 404) keeps nothing, so a retry runs again."""
    r = await client.post(f"{BASE}/lists", json={"name": "Theirs"}, headers=auth(other_tenant))
    list_id = r.json()["list"]["id"]
    for _ in range(2):
        r = await client.post(
            f"{BASE}/lists/{list_id}/keywords",
            json={"keywords": ["x"]},
            headers=_keyed(tenant, "lost-1"),
        )
        assert r.status_code == 404
    assert await _count(runtime, ListKeyword, ListKeyword.list_id == list_id) == 0
