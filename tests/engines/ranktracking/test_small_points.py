"""The small points of issue 35 (RT-76): schedules answer their cap in micro-euros (no more
``monthly_cap_cents``), counts agree with their nouns, the schedule page shows the paged table
rather than every latest result below it, and a location typed by name in the dashboard's form is
resolved to its code — or the form says clearly that it is unknown or which ones it could be."""

from __future__ import annotations

import re
from decimal import Decimal

import httpx

from app.engines.ranktracking.alerts.decide import describe, keywords
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.location_sync import sync_locations
from app.engines.ranktracking.wording import counted
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import DOMAIN, fund, make_schedule, measure
from tests.factories import Tenant
from tests.platform.conftest import post_form, sign_in

BASE = "/api/v1/ranktracking"
PARIS = 1006094


async def test_rt76_schedules_answer_the_cap_in_micros_not_cents(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-76: ``monthly_cap_micros`` (exact) and ``monthly_cap_eur`` (display) replace
    ``monthly_cap_cents`` in every schedule answer."""
    schedule = await make_schedule(runtime, tenant, monthly_cap_eur=Decimal("12.5"))
    r = await client.get(f"{BASE}/schedules/{schedule.id}", headers=auth(tenant))
    body = r.json()
    assert "monthly_cap_cents" not in body
    assert (body["monthly_cap_micros"], body["monthly_cap_eur"]) == (12_500_000, "12.50")
    listed = (await client.get(f"{BASE}/schedules", headers=auth(tenant))).json()
    rows = listed["items"] if isinstance(listed, dict) else listed
    assert all("monthly_cap_cents" not in row for row in rows)
    uncapped = await make_schedule(runtime, tenant, keywords=["green shoes"])
    body = (await client.get(f"{BASE}/schedules/{uncapped.id}", headers=auth(tenant))).json()
    assert (body["monthly_cap_micros"], body["monthly_cap_eur"]) == (None, None)


def test_rt76_counts_agree_with_their_nouns() -> None:
    """RT-76: "1 keyword enters the top 3", "2 keywords enter the top 3"."""
    assert f"{keywords(1)} {describe('enters_top', 3, 1)}" == "1 keyword enters the top 3"
    assert f"{keywords(2)} {describe('enters_top', 3, 2)}" == "2 keywords enter the top 3"
    assert f"{keywords(2)} {describe('leaves_top', 10, 2)}" == "2 keywords leave the top 10"
    assert describe("moves", 1, 3) == "move by 1 place or more"
    assert describe("moves", 5) == "moves by 5 places or more"
    assert counted(1, "child run") == "1 child run"
    assert counted(0, "child run") == "0 child runs"


async def test_rt76_the_schedule_page_shows_the_paged_table_only(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-76: 150 keywords measured; the page shows the first 100 rows of the positions table and
    no list of every latest result below it."""
    await fund(runtime, tenant, 10_000)
    words = [f"shoe model {n}" for n in range(150)]
    schedule = await make_schedule(runtime, tenant, keywords=words)
    await measure(runtime, sim, schedule.id, {w: (n % 12 + 1, None) for n, w in enumerate(words)})
    await sign_in(client, tenant.email, tenant.password)
    page = await client.get(f"/ui/ranktracking/schedules/{schedule.id}")
    assert page.status_code == 200
    assert 'id="rt-results"' not in page.text
    table = page.text.split('id="rt-positions"', 1)[1]
    assert "150 rows, 100 on this page" in page.text
    assert len(re.findall(r"/keyword\?keyword=", table)) <= 100


async def test_rt76_a_location_typed_by_name_in_the_form(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-76: "paris" (as typed, without picking from the list) creates a schedule in Paris
    (1006094); an unknown place and an ambiguous one answer the form again with a 422 that says
    so, naming the candidates."""
    await fund(runtime, tenant, 1000)
    await sync_locations(RankTrackingDeps.of(runtime), runtime.clock.now())
    await sign_in(client, tenant.email, tenant.password)

    def fields(location: str, name: str) -> dict[str, str]:
        return {
            "name": name,
            "data_type": "serp",
            "frequency": "weekly",
            "source": "selection",
            "keywords": "chaussures rouges",
            "depth": "top10",
            "location_code": location,
            "language_code": "fr",
            "domain": DOMAIN,
            "device_desktop": "on",
        }

    new = "/ui/ranktracking/new"
    r = await post_form(client, new, new, **fields("  Paris ", "Paris shoes"))
    assert r.status_code in (302, 303), r.text
    schedule_id = int(r.headers["location"].split("/schedules/")[1].split("?")[0])
    body = (await client.get(f"{BASE}/schedules/{schedule_id}", headers=auth(tenant))).json()
    assert body["location_code"] == PARIS

    r = await post_form(client, new, new, **fields("France", "All of France"))
    assert r.status_code in (302, 303), r.text
    schedule_id = int(r.headers["location"].split("/schedules/")[1].split("?")[0])
    body = (await client.get(f"{BASE}/schedules/{schedule_id}", headers=auth(tenant))).json()
    assert body["location_code"] == 2250

    r = await post_form(client, new, new, **fields("Atlantis", "Nowhere"))
    assert r.status_code == 422
    assert "Location: no location is called “Atlantis”; pick one from the list" in r.text
    assert 'value="Atlantis"' in r.text

    r = await post_form(client, new, new, **fields("san", "Somewhere"))
    assert r.status_code == 422
    assert "“san” matches several locations:" in r.text

    # The live estimate resolves the same way.
    r = await post_form(client, new, "/ui/ranktracking/estimate", **fields("paris", "x"))
    assert r.status_code == 200
    assert "no location" not in r.text
