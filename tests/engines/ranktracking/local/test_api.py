"""The geo-grid JSON API (RT-125, RT-126): estimate, run now (402 with the estimate and the
balance when it is short, nothing written), list, read with average rank and top-3 share,
delete; a bad field answers 422 naming it; another workspace's scan is 404."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.engines.ranktracking.local.models import GeoGrid
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import available_micros, fund
from tests.engines.ranktracking.local.helpers import PARIS, PLACE_ID, finish, place
from tests.factories import Tenant

API = "/api/v1/ranktracking/geogrids"
BODY: dict[str, Any] = {
    "keyword": "boulangerie",
    "latitude": PARIS[0],
    "longitude": PARIS[1],
    "place_id": PLACE_ID,
    "size": 3,
    "spacing_m": 500,
    "zoom": 15,
    "language_code": "fr",
}


async def test_rt125_run_read_list_delete(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-125: the estimate is 9 × the SERP price; run now posts the cells; once collected the
    scan shows each cell's rank, the average rank and the top-3 share; the list shows it; a
    running scan cannot be deleted (409), a finished one can (its ledger stays)."""
    place(sim, 2)
    await fund(runtime, tenant, 100)
    r = await client.post(f"{API}/estimate", json=BODY, headers=auth(tenant))
    assert r.status_code == 200, r.text
    estimate = r.json()
    assert estimate["cells"] == 9
    assert estimate["estimate_micros"] > 0
    before = await available_micros(runtime, tenant)

    r = await client.post(API, json=BODY, headers=auth(tenant))
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["status"] == "collecting"
    assert made["reserved_micros"] == estimate["estimate_micros"]
    assert [c["state"] for c in made["cells"]] == ["posted"] * 9
    assert await available_micros(runtime, tenant) == before - estimate["estimate_micros"]
    r = await client.delete(f"{API}/{made['id']}", headers=auth(tenant))
    assert r.status_code == 409
    assert r.json()["code"] == "geogrid_running"

    await finish(runtime, made["id"])
    got = (await client.get(f"{API}/{made['id']}", headers=auth(tenant))).json()
    assert got["status"] == "done"
    ranks = [c["rank"] for c in got["cells"]]
    assert ranks[4] == 2
    assert ranks == [3, 3, 3, 3, 2, 3, 3, 3, 3]
    assert got["average_rank"] == round(26 / 9, 2)
    assert got["top3_share"] == 1.0
    assert got["found_cells"] == 9
    assert got["settled_micros"] == estimate["estimate_micros"]
    listed = (await client.get(API, headers=auth(tenant))).json()["items"]
    assert [s["id"] for s in listed] == [made["id"]]
    assert listed[0]["cells"] is None

    r = await client.delete(f"{API}/{made['id']}", headers=auth(tenant))
    assert r.status_code == 204
    assert (await client.get(f"{API}/{made['id']}", headers=auth(tenant))).status_code == 404


async def test_rt125_short_balance_answers_402_and_writes_nothing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-125: a 9×9 grid beyond the balance: 402 with the estimate and what is available; no
    scan, no reservation, nothing posted."""
    await fund(runtime, tenant, 1)
    r = await client.post(API, json={**BODY, "size": 9}, headers=auth(tenant))
    assert r.status_code == 402, r.text
    body = r.json()
    assert body["code"] == "insufficient_balance"
    assert "estimated at" in body["message"]
    assert body["details"][0]["estimate_micros"] > body["details"][0]["available_micros"]
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(GeoGrid)) == 0
    assert sim.count("maps.task_post") == 0
    assert await available_micros(runtime, tenant) == 10_000


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"size": 4}, "size"),
        ({"spacing_m": 10}, "spacing_m"),
        ({"zoom": 30}, "zoom"),
        ({"latitude": 95.0}, "latitude"),
        ({"longitude": 200.0}, "longitude"),
        ({"engine": "bing"}, "engine"),
        ({"keyword": "   "}, "keyword"),
        ({"language_code": "French"}, "language_code"),
        ({"queue": "fast"}, "queue"),
        ({"cid": "abc"}, "cid"),
        ({"place_id": None}, "business_name"),
    ],
)
async def test_rt126_bad_input_names_the_field(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    sim: SerpSimulator,
    change: dict[str, Any],
    field: str,
) -> None:
    """RT-126: each impossible scan is refused with 422 naming its field, for the estimate and
    for run now, and leaves nothing behind."""
    await fund(runtime, tenant, 100)
    body = {**BODY, **change}
    for path in (f"{API}/estimate", API):
        r = await client.post(path, json=body, headers=auth(tenant))
        assert r.status_code == 422, r.text
        assert r.json()["details"][0]["field"] == field
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(GeoGrid)) == 0


async def test_rt126_wrong_types_and_other_workspaces(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    sim: SerpSimulator,
) -> None:
    """RT-126: a body of the wrong type is a 422 naming the field; a scan of another workspace
    is 404 to read, rerun and delete."""
    r = await client.post(API, json={**BODY, "size": "big"}, headers=auth(tenant))
    assert r.status_code == 422
    assert "size" in r.text
    await fund(runtime, tenant, 100)
    made = (await client.post(API, json=BODY, headers=auth(tenant))).json()
    for call in (
        client.get(f"{API}/{made['id']}", headers=auth(other_tenant)),
        client.post(f"{API}/{made['id']}/rerun", headers=auth(other_tenant)),
        client.delete(f"{API}/{made['id']}", headers=auth(other_tenant)),
    ):
        assert (await call).status_code == 404
