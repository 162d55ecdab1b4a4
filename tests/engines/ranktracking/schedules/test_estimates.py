"""Estimates over HTTP refuse what the other operations refuse, with the same body: a list past
the per-run limit (RT-5, like an estimate of a new schedule) and the priority queue of keyword
data (RT-26, like "measure quickly")."""

from __future__ import annotations

import httpx
import msgspec

from app.runtime import Runtime
from tests.conftest import auth
from tests.engines.ranktracking.factories import KEYWORD_DATA, make_list, make_schedule, serp_in
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


async def test_rt5_an_existing_schedule_over_the_limit_is_refused_like_a_new_one(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    h = auth(tenant)
    kl = await make_list(runtime, tenant, [f"k{i}" for i in range(500)])
    schedule = await make_schedule(runtime, tenant, list_id=kl.id)
    # The list grows past the limit after the schedule was created.
    r = await client.post(
        f"{BASE}/lists/{kl.id}/keywords", json={"keywords": ["one more"]}, headers=h
    )
    assert r.status_code in (200, 201), r.text

    existing = await client.get(f"{BASE}/schedules/{schedule.id}/estimate", headers=h)
    # The same configuration, not yet created.
    new = await client.post(
        f"{BASE}/estimate", json=msgspec.to_builtins(serp_in(list_id=kl.id)), headers=h
    )
    assert (existing.status_code, new.status_code) == (422, 422)
    assert existing.json()["details"][0]["code"] == "members_over_limit"
    assert existing.json() == new.json()


async def test_rt26_a_priority_estimate_of_keyword_data_is_refused_like_a_priority_run(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    h = auth(tenant)
    kl = await make_list(runtime, tenant, ["a"])
    schedule = await make_schedule(runtime, tenant, list_id=kl.id, **KEYWORD_DATA)

    estimate = await client.get(
        f"{BASE}/schedules/{schedule.id}/estimate", params={"queue": "priority"}, headers=h
    )
    run = await client.post(
        f"{BASE}/schedules/{schedule.id}/run", json={"queue": "priority"}, headers=h
    )
    assert (estimate.status_code, run.status_code) == (422, 422)
    assert estimate.json()["details"] == [
        {"field": "queue", "message": "keyword data has no priority queue", "code": "no_priority"}
    ]
    assert estimate.json() == run.json()
    # The standard queue is estimated as usual.
    standard = await client.get(f"{BASE}/schedules/{schedule.id}/estimate", headers=h)
    assert standard.status_code == 200, standard.text
