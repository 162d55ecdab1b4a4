"""Keywords from Google Search Console over the API (RT-68, RT-69), against the Search Console
simulator and Google's token endpoint on loopback, with the workspace's service-account key
stored as the Sheets integration stores it: properties, a preview of more queries than one page,
the chosen queries added without duplicates to a selection or a list, and every failure a clear
error that writes nothing."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from app.runtime import Runtime
from app.sandbox.search_console import QueryRow, SearchConsoleSandbox
from app.sandbox.sheets import SheetsSandbox
from tests.conftest import auth
from tests.engines.ranktracking.factories import (
    GSC_PAGE_ROWS,
    make_list,
    make_schedule,
    store_google_key,
)
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"
SITE = "sc-domain:acme-shop.com"
ACCOUNT = "keywords@acme-shop.iam.gserviceaccount.com"


def _range(runtime: Runtime, days: int = 28) -> dict[str, str]:
    today = runtime.clock.now().date()
    return {
        "site_url": SITE,
        "start_date": (today - timedelta(days=days)).isoformat(),
        "end_date": (today - timedelta(days=2)).isoformat(),
    }


def _day(runtime: Runtime, back: int = 5) -> str:
    return (runtime.clock.now().date() - timedelta(days=back)).isoformat()


async def _ready(runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox) -> None:
    await store_google_key(runtime, tenant, gsc.google.new_service_account(ACCOUNT))
    gsc.add_property(SITE)


async def test_rt68_lists_the_properties_of_the_workspace_service_account(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    gsc.add_property("https://www.acme-shop.com/", "siteFullUser")
    r = await client.get(f"{BASE}/search-console/properties", headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert r.json() == [
        {"site_url": "https://www.acme-shop.com/", "permission_level": "siteFullUser"},
        {"site_url": SITE, "permission_level": "siteOwner"},
    ]


async def test_rt68_preview_reads_more_queries_than_one_page_with_their_figures(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    schedule = await make_schedule(runtime, tenant)  # red shoes, blue shoes
    total = 2 * GSC_PAGE_ROWS + 345
    gsc.add_rows(
        SITE,
        [
            QueryRow(f"shoe query {i:04d}", _day(runtime), total - i, 10 * (total - i), 3.5)
            for i in range(total)
        ],
    )
    # One query over two days, and spelled two ways: one keyword, figures summed.
    gsc.add_rows(
        SITE,
        [
            QueryRow("Red Shoes", _day(runtime, 3), 40, 100, 2.0),
            QueryRow("red  shoes", _day(runtime, 4), 10, 300, 6.0),
        ],
    )
    r = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/preview",
        json=_range(runtime),
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    body = r.json()
    queries = {q["keyword"]: q for q in body["queries"]}
    assert len(queries) == total + 1
    assert body["truncated"] is False
    assert gsc.count("searchanalytics.query") == 3  # 1000 + 1000 + 346 rows, by startRow
    assert queries["shoe query 0007"] == {
        "keyword": "shoe query 0007",
        "clicks": total - 7,
        "impressions": 10 * (total - 7),
        "ctr": 0.1,
        "position": 3.5,
        "tracked": False,
    }
    red = queries["red shoes"]
    assert (red["clicks"], red["impressions"], red["tracked"]) == (50, 400, True)
    assert red["position"] == 5.0  # (2 × 100 + 6 × 300) / 400, by impressions
    assert body["queries"][0]["keyword"] == "shoe query 0000"  # most clicked first


async def test_rt69_chosen_queries_join_a_selection_without_duplicates(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    schedule = await make_schedule(runtime, tenant)
    r = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/keywords",
        json={
            "keywords": ["Red  Shoes", "running shoes", "Running Shoes", "trail shoes"],
            "tag": "From GSC",
        },
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    assert r.json() == {
        "added": ["running shoes", "trail shoes"],
        "skipped_existing": ["red shoes"],
        "skipped_duplicates": ["running shoes"],
        "invalid": [],
        "keyword_count": 4,
        "tag": "from gsc",
    }
    got = (await client.get(f"{BASE}/schedules/{schedule.id}", headers=auth(tenant))).json()
    assert got["keywords"] == ["red shoes", "blue shoes", "running shoes", "trail shoes"]
    tags = (await client.get(f"{BASE}/schedules/{schedule.id}/tags", headers=auth(tenant))).json()
    assert tags["tags"] == [{"tag": "from gsc", "keyword_count": 3}]
    # The same choice again adds nothing.
    again = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/keywords",
        json={"keywords": ["running shoes", "trail shoes"]},
        headers=auth(tenant),
    )
    assert again.json()["added"] == []
    assert again.json()["keyword_count"] == 4


async def test_rt69_chosen_queries_join_the_linked_list(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox
) -> None:
    kl = await make_list(runtime, tenant, ["red shoes", "blue shoes"])
    schedule = await make_schedule(runtime, tenant, list_id=kl.id)
    r = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/keywords",
        json={"keywords": ["blue shoes", "green shoes"]},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    assert (r.json()["added"], r.json()["skipped_existing"]) == (["green shoes"], ["blue shoes"])
    listed = (await client.get(f"{BASE}/lists/{kl.id}", headers=auth(tenant))).json()
    assert listed["keywords"] == ["red shoes", "blue shoes", "green shoes"]


async def test_rt69_a_selection_over_its_limit_is_refused_with_nothing_added(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox
) -> None:
    schedule = await make_schedule(runtime, tenant)
    limit = runtime.settings.ranktracking.max_selection_keywords
    r = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/keywords",
        json={"keywords": [f"query {i}" for i in range(limit)], "tag": "gsc"},
        headers=auth(tenant),
    )
    assert r.status_code == 422, r.text
    assert r.json()["details"][0]["field"] == "keywords"
    got = (await client.get(f"{BASE}/schedules/{schedule.id}", headers=auth(tenant))).json()
    assert got["keywords"] == ["red shoes", "blue shoes"]
    tags = (await client.get(f"{BASE}/schedules/{schedule.id}/tags", headers=auth(tenant))).json()
    assert tags == {"tags": [], "keywords": {}}


async def test_rt68_without_a_key_the_error_says_which_secret_to_set(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox
) -> None:
    schedule = await make_schedule(runtime, tenant)
    r = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/preview",
        json=_range(runtime),
        headers=auth(tenant),
    )
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "search_console_not_configured"
    assert "google_service_account_key" in r.json()["message"]


@pytest.mark.parametrize("case", ["not_json", "unknown_account", "not_shared"])
async def test_rt68_bad_credentials_are_a_clear_422(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    gsc: SearchConsoleSandbox,
    case: str,
) -> None:
    schedule = await make_schedule(runtime, tenant)
    expected = {
        "not_json": "not a JSON key file",
        "unknown_account": "invalid_grant",
        "not_shared": "does not have sufficient permission",
    }[case]
    if case == "not_json":
        await store_google_key(runtime, tenant, "AIzaSy-an-api-key-is-not-a-service-account")
    elif case == "unknown_account":
        stranger = SheetsSandbox().new_service_account("stranger@elsewhere.iam.gserviceaccount.com")
        await store_google_key(runtime, tenant, stranger)
        gsc.add_property(SITE)
    else:
        await store_google_key(runtime, tenant, gsc.google.new_service_account(ACCOUNT))
    r = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/preview",
        json=_range(runtime),
        headers=auth(tenant),
    )
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "search_console_refused"
    assert expected in r.json()["message"]


async def test_rt68_garbage_or_a_timeout_from_the_api_is_a_502(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    gsc.add_rows(SITE, [QueryRow("red shoes", _day(runtime), 3, 30, 4.0)])
    schedule = await make_schedule(runtime, tenant)
    url = f"{BASE}/schedules/{schedule.id}/search-console/preview"

    gsc.inject("searchanalytics.query", status=200, raw=b"<html>Server Error</html>", times=1)
    garbage = await client.post(url, json=_range(runtime), headers=auth(tenant))
    assert garbage.status_code == 502, garbage.text
    assert garbage.json()["code"] == "search_console_unavailable"
    assert "unexpected shape" in garbage.json()["message"]

    gsc.inject("searchanalytics.query", delay_seconds=2.0, times=-1)
    slow = await client.post(url, json=_range(runtime), headers=auth(tenant))
    assert slow.status_code == 502, slow.text
    assert "did not answer in time" in slow.json()["message"]
    gsc.state.clear_faults()

    fine = await client.post(url, json=_range(runtime), headers=auth(tenant))
    assert [q["keyword"] for q in fine.json()["queries"]] == ["red shoes"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"start_date": "2026-02-30"}, "start_date"),
        ({"end_date": "2999-01-01"}, "end_date"),
        ({"start_date": "2001-01-01"}, "start_date"),
    ],
)
async def test_rt68_a_bad_range_is_refused_naming_the_field_before_any_call(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    gsc: SearchConsoleSandbox,
    change: dict[str, str],
    field: str,
) -> None:
    await _ready(runtime, tenant, gsc)
    schedule = await make_schedule(runtime, tenant)
    r = await client.post(
        f"{BASE}/schedules/{schedule.id}/search-console/preview",
        json={**_range(runtime), **change},
        headers=auth(tenant),
    )
    assert r.status_code == 422, r.text
    assert r.json()["details"][0]["field"] == field
    assert gsc.count() == 0
