"""The position tracking API: shapes, errors in the project's format, workspace isolation."""

from __future__ import annotations

from decimal import Decimal

import httpx

from app.engines.ranktracking import money
from app.runtime import Runtime
from tests.conftest import auth
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


def serp_body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": "Shoes",
        "data_type": "serp",
        "frequency": "weekly",
        "depth": "top10",
        "location_code": 2840,
        "language_code": "en",
        "domain": "acme-shop.com",
        "devices": ["desktop", "mobile"],
    }
    body.update(overrides)
    return body


async def test_lists_and_schedule_lifecycle_over_http(
    client: httpx.AsyncClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime
) -> None:
    h = auth(tenant)
    r = await client.post(
        f"{BASE}/lists",
        json={"name": "Main", "keywords": ["Red Shoes", "red shoes", "blue shoes"]},
        headers=h,
    )
    assert r.status_code == 201, r.text
    created = r.json()
    list_id = created["list"]["id"]
    assert created["report"]["added"] == ["red shoes", "blue shoes"]
    assert created["report"]["skipped_duplicates"] == ["red shoes"]
    r = await client.post(
        f"{BASE}/lists/{list_id}/import",
        json={"text": "keyword\nblue shoes\ngreen shoes\n", "format": "csv"},
        headers=h,
    )
    assert r.json()["skipped_existing"] == ["blue shoes"]
    assert r.json()["added"] == ["green shoes"]

    r = await client.post(f"{BASE}/estimate", json=serp_body(list_id=list_id), headers=h)
    assert r.status_code == 200, r.text
    est = r.json()
    assert (
        est["keyword_count"],
        est["cost_per_run_micros"],
        est["monthly_cents"],
        est["available_micros"],
    ) == (3, 3096, 2, 0)  # 3 × 0.000516 EUR × 2 devices; × 52/12 = 1.34 cents → 2

    r = await client.post(f"{BASE}/schedules", json=serp_body(list_id=list_id), headers=h)
    assert r.status_code == 201, r.text
    body = r.json()
    schedule_id = body["schedule"]["id"]
    assert body["baseline"]["launched"] == 0
    assert (body["baseline"]["reason"], body["baseline"]["code"]) == (
        "balance",
        "insufficient_balance",
    )

    r = await client.post(
        f"{BASE}/schedules", json=serp_body(list_id=list_id, depth="top100"), headers=h
    )
    assert (r.status_code, r.json()["code"]) == (409, "duplicate_schedule")

    # Top-ups are organisation-level: a workspace key is refused, an owner tops up signed in.
    r = await client.post(f"{BASE}/balance/top-ups", json={"amount_eur": "10.00"}, headers=h)
    assert r.status_code == 403
    async with runtime.db.write() as uow:
        await money.top_up(
            uow.session, organisation_id=tenant.organisation_id, workspace_id=tenant.workspace_id,
            amount_eur=Decimal("10.00"), note="owner top-up", now=runtime.clock.now(),
        )  # fmt: skip
    r = await client.get(f"{BASE}/balance", headers=h)
    assert r.json()["available_micros"] == 10_000_000
    r = await client.post(
        f"{BASE}/schedules/{schedule_id}/run", json={"queue": "priority"}, headers=h
    )
    run = r.json()
    assert (run["launched"], run["reason"]) == (2, None)
    assert {x["status"] for x in run["runs"]} == {"dispatching"}
    assert {x["pending"] for x in run["runs"]} == {3}
    r = await client.post(f"{BASE}/schedules/{schedule_id}/run", json={}, headers=h)
    assert (r.json()["launched"], r.json()["reason"]) == (0, "active_run")

    log = (await client.get(f"{BASE}/schedules/{schedule_id}/log", headers=h)).json()
    assert [g["status"] for g in log["items"]] == ["dispatching", "skipped_balance"]
    assert [len(g["runs"]) for g in log["items"]] == [2, 2]  # two-device groups
    assert [p["status"] for p in log["health"]] == ["skipped_balance", "dispatching"]

    r = await client.post(f"{BASE}/schedules/{schedule_id}/pause", headers=h)
    assert r.json()["status"] == "paused_user"
    assert (await client.get(f"{BASE}/balance", headers=h)).json()["available_micros"] == 10_000_000
    r = await client.post(f"{BASE}/schedules/{schedule_id}/end", headers=h)
    assert r.json()["status"] == "archived"
    assert (await client.get(f"{BASE}/schedules", headers=h)).json() == []
    assert len((await client.get(f"{BASE}/schedules?include_archived=true", headers=h)).json()) == 1
    r = await client.post(f"{BASE}/schedules/{schedule_id}/resume", headers=h)
    assert (r.status_code, r.json()["code"]) == (409, "schedule_state")

    kinds = [a["kind"] for a in (await client.get(f"{BASE}/activity", headers=h)).json()["items"]]
    for kind in ("schedule_created", "run_skipped", "topup", "schedule_paused", "schedule_ended"):
        assert kind in kinds
    ledger = (await client.get(f"{BASE}/ledger", headers=h)).json()["items"]
    assert [e["kind"] for e in ledger][-1] == "topup"

    # Another workspace sees none of it.
    o = auth(other_tenant)
    assert (await client.get(f"{BASE}/schedules/{schedule_id}", headers=o)).status_code == 404
    assert (await client.get(f"{BASE}/lists/{list_id}", headers=o)).status_code == 404
    assert (
        await client.post(f"{BASE}/schedules/{schedule_id}/run", json={}, headers=o)
    ).status_code == 404
    assert (await client.get(f"{BASE}/balance", headers=o)).json()["available_micros"] == 0


async def test_bad_input_answers_4xx_and_writes_nothing(
    client: httpx.AsyncClient, tenant: Tenant, runtime: Runtime
) -> None:
    h = auth(tenant)
    r = await client.post(
        f"{BASE}/schedules",
        json=serp_body(keywords=["a"], language_code="xx", location_code=-1),
        headers=h,
    )
    assert r.status_code == 422
    fields = {d["field"] for d in r.json()["details"]}
    assert {"language_code", "location_code"} <= fields
    r = await client.post(
        f"{BASE}/schedules", json=serp_body(keywords=["a"], surprise=1), headers=h
    )
    assert r.status_code in (400, 422)
    r = await client.post(
        f"{BASE}/schedules", json=serp_body(keywords=["a"], depth="top20"), headers=h
    )
    assert r.status_code in (400, 422)
    r = await client.post(
        f"{BASE}/schedules", json=serp_body(keywords=["a"], monthly_cap_eur="4.99"), headers=h
    )
    assert (r.status_code, r.json()["details"][0]["code"]) == (422, "cap_too_low")
    assert (await client.get(f"{BASE}/schedules", headers=h)).json() == []
    r = await client.post(
        f"{BASE}/schedules",
        json=serp_body(
            keywords=["a"],
            data_type="keyword_data",
            frequency="monthly",
            packages=["volume"],
            devices=None,
            depth=None,
            domain=None,
        ),
        headers=h,
    )
    assert r.status_code == 422
    r = await client.post(
        f"{BASE}/schedules", json=serp_body(keywords=["a"], monthly_cap_eur="Infinity"), headers=h
    )
    assert r.status_code in (400, 422)
    r = await client.get(f"{BASE}/ledger?cursor=abc", headers=h)
    assert (r.status_code, r.json()["code"]) == (422, "validation_failed")
    # Keyword data has no priority queue.
    r = await client.post(
        f"{BASE}/schedules",
        json={
            "name": "kd",
            "data_type": "keyword_data",
            "frequency": "monthly",
            "keywords": None,
            "list_id": (
                await client.post(f"{BASE}/lists", json={"name": "L", "keywords": ["a"]}, headers=h)
            ).json()["list"]["id"],
            "location_code": 2840,
            "language_code": "en",
            "packages": ["volume"],
        },
        headers=h,
    )
    assert r.status_code == 201, r.text
    kd_id = r.json()["schedule"]["id"]
    r = await client.post(f"{BASE}/schedules/{kd_id}/run", json={"queue": "priority"}, headers=h)
    assert (r.status_code, r.json()["details"][0]["code"]) == (422, "no_priority")
    r = await client.patch(f"{BASE}/schedules/{kd_id}", json={"data_type": "serp"}, headers=h)
    assert (r.status_code, r.json()["details"][0]["code"]) == (422, "fixed_field")
    draft = await client.get(f"{BASE}/schedules/{kd_id}/mobile-draft", headers=h)
    assert draft.status_code == 422


async def test_a_csv_import_with_bare_carriage_returns_and_one_with_a_giant_field(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """A bare carriage return ends a CSV row (it was a 500: the reader refused it inside a
    line), and a field over the CSV reader's size limit is a 422 naming the problem."""
    h = auth(tenant)
    r = await client.post(f"{BASE}/lists", json={"name": "Imports", "keywords": []}, headers=h)
    assert r.status_code == 201, r.text
    list_id = r.json()["list"]["id"]
    r = await client.post(
        f"{BASE}/lists/{list_id}/import",
        json={"text": "keyword\rred shoes\rblue\u2028shoes\r\ngreen shoes", "format": "csv"},
        headers=h,
    )
    assert r.status_code == 201, r.text
    assert sorted(r.json()["added"]) == ["blue shoes", "green shoes", "red shoes"]  # normalised
    r = await client.post(
        f"{BASE}/lists/{list_id}/import",
        json={"text": "x" * 200_000, "format": "csv"},
        headers=h,
    )
    assert r.status_code == 422, r.text
    assert "field larger than field limit" in r.json()["message"]
