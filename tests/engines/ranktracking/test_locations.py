"""The provider's locations list (RT-60 to RT-63): synced from the provider's locations endpoint on
first use and weekly (upserted by code; a location the provider drops is marked, and schedules
using it keep running with a warning), searched by name without case or accents, accepted by any
schedule by code (Paris 1006094), and named wherever a schedule's location is shown."""

from __future__ import annotations

import csv
import io
import re

import httpx
from sqlalchemy import func, select

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.location_models import ProviderLocation
from app.engines.ranktracking.location_sync import locations_tick, sync_locations
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import DOMAIN, collect, fund
from tests.factories import Tenant
from tests.platform.conftest import post_form, sign_in

BASE = "/api/v1/ranktracking"
PARIS = 1006094
PARIS_NAME = "Paris,Ile-de-France,France"


def _body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": "Paris shoes",
        "data_type": "serp",
        "frequency": "weekly",
        "depth": "top10",
        "location_code": PARIS,
        "language_code": "fr",
        "domain": DOMAIN,
        "devices": ["desktop"],
        "keywords": ["chaussures rouges"],
    }
    body.update(overrides)
    return body


async def _rows(runtime: Runtime) -> dict[int, ProviderLocation]:
    async with runtime.db.read() as session:
        rows = (await session.execute(select(ProviderLocation))).scalars()
        return {row.code: row for row in rows}


async def _search(client: httpx.AsyncClient, tenant: Tenant, q: str) -> list[dict[str, object]]:
    r = await client.get(f"{BASE}/locations", params={"q": q}, headers=auth(tenant))
    assert r.status_code == 200, r.text
    found: list[dict[str, object]] = r.json()
    return found


async def test_rt60_the_first_search_syncs_the_providers_whole_list(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    """RT-60: before any sync only countries are known; the first search reads the provider's
    list once (thousands of regions, cities and postal codes) and finds Paris by name."""
    found = await _search(client, tenant, "paris")
    assert sim.state.count("serp.locations") == 1
    assert found[0] == {
        "location_code": PARIS,
        "location_name": PARIS_NAME,
        "country_iso_code": "FR",
        "location_type": "City",
        "parent_code": 20321,
    }
    rows = await _rows(runtime)
    assert len(rows) == len(sim.locations) > 4000
    kinds = {row.kind for row in rows.values()}
    assert {"Country", "Region", "City", "Postal Code", "DMA Region"} <= kinds
    assert all(row.dropped_at is None for row in rows.values())
    # Synced once: later searches read the table.
    await _search(client, tenant, "lyon")
    assert sim.state.count("serp.locations") == 1


async def test_rt61_weekly_resync_upserts_and_marks_dropped_locations(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator, clock
) -> None:
    """RT-61: the hourly sweep syncs when the last sync is a week old: codes stay, a renamed
    location is renamed in place, a new one appears, a dropped one is marked (not deleted) and a
    schedule using it keeps it and shows a warning; a location that comes back is unmarked."""
    deps = RankTrackingDeps.of(runtime)
    await locations_tick(runtime.context(), clock.now())  # never synced: syncs now
    assert sim.state.count("serp.locations") == 1
    await fund(runtime, tenant, 1000)
    created = await client.post(f"{BASE}/schedules", json=_body(), headers=auth(tenant))
    assert created.status_code == 201, created.text
    schedule_id = created.json()["schedule"]["id"]

    sim.locations.drop(PARIS)
    sim.locations.add(1006167, "Lyon,Auvergne-Rhone-Alpes,France (renamed)", 20327, "FR", "City")
    sim.locations.add(1999001, "Villeurbanne,Auvergne-Rhone-Alpes,France", 20327, "FR", "City")
    clock.advance(days=6)
    await locations_tick(runtime.context(), clock.now())
    assert sim.state.count("serp.locations") == 1  # not a week yet
    clock.advance(days=1)
    await locations_tick(runtime.context(), clock.now())
    assert sim.state.count("serp.locations") == 2

    rows = await _rows(runtime)
    assert len(rows) == len(sim.locations) + 1  # Paris kept
    assert rows[PARIS].dropped_at == clock.now()
    assert rows[PARIS].name == PARIS_NAME
    assert rows[1006167].name.endswith("(renamed)")
    assert rows[1999001].dropped_at is None
    assert [r["location_code"] for r in await _search(client, tenant, "villeurbanne")] == [1999001]
    assert PARIS not in [r["location_code"] for r in await _search(client, tenant, "paris")]

    shown = (await client.get(f"{BASE}/schedules/{schedule_id}", headers=auth(tenant))).json()
    assert shown["location_code"] == PARIS
    assert shown["location_name"] == PARIS_NAME
    assert "no longer lists" in shown["location_warning"]
    # Kept by the schedule that has it (an edit of another field passes), refused as a new choice.
    edited = await client.patch(
        f"{BASE}/schedules/{schedule_id}", json={"name": "renamed"}, headers=auth(tenant)
    )
    assert edited.status_code == 200, edited.text
    again = await client.post(
        f"{BASE}/schedules", json=_body(name="other", keywords=["x"]), headers=auth(tenant)
    )
    assert again.status_code == 422, again.text
    assert again.json()["details"][0] == {
        "field": "location_code",
        "message": f"{PARIS} ({PARIS_NAME}) is no longer offered by the provider",
        "code": "dropped_location",
    }

    sim.locations.add(PARIS, PARIS_NAME, 20321, "FR", "City")
    clock.advance(days=7)
    report = await sync_locations(deps, clock.now())
    assert report.dropped == 0
    assert (await _rows(runtime))[PARIS].dropped_at is None


async def test_rt62_search_ignores_case_and_accents_and_knows_local_names(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    """RT-62: "sao paulo" finds São Paulo, "munchen" and "MUNICH" find Munich, "zurich" finds
    Zürich, a postal code finds its place, an ISO code finds its country first."""

    async def codes(q: str) -> list[object]:
        return [r["location_code"] for r in await _search(client, tenant, q)]

    assert (await codes("sao paulo"))[0] == 1001773
    assert (await codes("São Paulo"))[0] == 1001773
    assert (await codes("munchen"))[0] == 1004234
    assert (await codes("München"))[0] == 1004234
    assert (await codes("MUNICH"))[0] == 1004234
    assert (await codes("zurich"))[:1] in ([1003297], [20133])
    assert 1003297 in await codes("zurich")
    assert (await codes("75001")) == [9056143]
    assert (await codes("fr"))[0] == 2250
    assert await codes("lyon") == [1006167]
    assert await codes("%") == []
    assert await codes("_") == []
    r = await client.get(f"{BASE}/locations", params={"q": "a", "limit": 5}, headers=auth(tenant))
    assert len(r.json()) == 5


async def test_rt60_a_schedule_in_paris_through_the_api_and_names_in_the_csv(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    """RT-60: a city code is accepted by creation even before any search (its first use syncs
    the list); RT-63: the schedule, positions.csv and log.csv name the location."""
    await fund(runtime, tenant, 1000)
    h = auth(tenant)
    estimate = await client.post(f"{BASE}/estimate", json=_body(), headers=h)
    assert estimate.status_code == 422  # nothing synced yet: only the shipped countries
    created = await client.post(f"{BASE}/schedules", json=_body(), headers=h)
    assert created.status_code == 201, created.text
    schedule = created.json()["schedule"]
    assert (schedule["location_code"], schedule["location_name"]) == (PARIS, PARIS_NAME)
    assert schedule["location_warning"] is None
    assert (await client.post(f"{BASE}/estimate", json=_body(), headers=h)).status_code == 200
    sim.place("chaussures rouges", DOMAIN, 4)
    for run in created.json()["baseline"]["runs"]:
        await collect(runtime, run["id"])

    log = list(
        csv.reader(
            io.StringIO(
                (await client.get(f"{BASE}/schedules/{schedule['id']}/log.csv", headers=h)).text
            )
        )
    )
    assert log[0][6:8] == ["location_code", "location_name"]
    assert [row[6:8] for row in log[1:]] == [[str(PARIS), PARIS_NAME]]
    positions = list(
        csv.reader(
            io.StringIO(
                (
                    await client.get(f"{BASE}/schedules/{schedule['id']}/positions.csv", headers=h)
                ).text
            )
        )
    )
    assert positions[0][2:4] == ["location_code", "location_name"]
    assert positions[1][:5] == ["chaussures rouges", "desktop", str(PARIS), PARIS_NAME, "4"]


async def test_rt60_a_schedule_in_paris_through_the_dashboard_form(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    """RT-60: the wizard's picker offers matching locations by name (an htmx swap of the
    datalist's options), the form creates the schedule with the city's code and its page names
    it (RT-63)."""
    await fund(runtime, tenant, 1000)
    await sign_in(client, tenant.email, tenant.password)
    wizard = await client.get("/ui/ranktracking/new")
    assert 'hx-get="/ui/ranktracking/partials/locations"' in wizard.text
    options = await client.get(
        "/ui/ranktracking/partials/locations", params={"location_code": "paris"}
    )
    assert options.status_code == 200, options.text
    assert f'<option value="{PARIS}">{PARIS_NAME} (City)</option>' in options.text
    assert "São Paulo" in (await client.get("/ui/ranktracking/partials/locations?q=sao+paulo")).text
    r = await post_form(
        client,
        "/ui/ranktracking/new",
        "/ui/ranktracking/new",
        name="Paris shoes",
        data_type="serp",
        frequency="weekly",
        source="selection",
        keywords="chaussures rouges",
        depth="top10",
        location_code=str(PARIS),
        language_code="fr",
        domain=DOMAIN,
        device_desktop="on",
    )
    assert r.status_code in (302, 303), r.text
    page = await client.get(r.headers["location"])
    assert page.status_code == 200
    shown = re.search(r'<span id="rt-location"[^>]*>([^<]*)</span>', page.text)
    assert shown is not None
    assert shown.group(1) == PARIS_NAME
    assert f"· {PARIS_NAME}" in (await client.get("/ui/ranktracking")).text


async def test_rt60_an_unreachable_provider_leaves_the_shipped_countries(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    """RT-60: a sync that fails (provider down) stores nothing and the shipped list still
    answers; the next use tries again."""
    sim.inject_status("serp.locations", 50000, times=1)
    assert [r["location_code"] for r in await _search(client, tenant, "germany")] == [2276]
    async with runtime.db.read() as session:
        assert (await session.execute(select(func.count(ProviderLocation.code)))).scalar() == 0
    assert PARIS in [r["location_code"] for r in await _search(client, tenant, "paris")]


async def test_rt60_the_client_reads_one_countrys_list(
    runtime: Runtime, sim: SerpSimulator
) -> None:
    """RT-60: the provider's per-country list (``…/locations/fr``) has only that country's
    locations, in the documented shape."""
    entries = await RankTrackingDeps.of(runtime).serp.serp_locations("FR")
    assert {e.country_iso_code for e in entries} == {"FR"}
    paris = next(e for e in entries if e.location_code == PARIS)
    assert (paris.location_name, paris.location_code_parent, paris.location_type) == (
        PARIS_NAME,
        20321,
        "City",
    )
    assert any(e.location_type == "Postal Code" for e in entries)
