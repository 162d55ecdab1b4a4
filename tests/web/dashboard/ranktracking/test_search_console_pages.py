"""The dashboard's Search Console import and keyword tags (RT-68 to RT-71), through the pages a
person uses, against the Search Console simulator on loopback: the property list and the preview
with its figures, the chosen queries added and tagged, Google's refusals said in words, tags put
on and taken off from the positions table, the table filtered by a tag with its paging links
keeping it, and the per-tag charts. Another workspace's schedule is a 404 on every page."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx

from app.runtime import Runtime
from app.sandbox.search_console import QueryRow, SearchConsoleSandbox
from app.sandbox.serp import SerpSimulator
from app.web.dashboard.ranktracking_reports import TableParams
from tests.conftest import auth
from tests.engines.ranktracking.factories import make_schedule, seeded_schedule, store_google_key
from tests.factories import Tenant
from tests.platform.conftest import post_form, sign_in

API = "/api/v1/ranktracking"
UI = "/ui/ranktracking/schedules"
SITE = "sc-domain:acme-shop.com"
ACCOUNT = "keywords@acme-shop.iam.gserviceaccount.com"


def _day(runtime: Runtime, back: int = 5) -> str:
    return (runtime.clock.now().date() - timedelta(days=back)).isoformat()


async def _ready(runtime: Runtime, tenant: Tenant, gsc: SearchConsoleSandbox) -> None:
    await store_google_key(runtime, tenant, gsc.google.new_service_account(ACCOUNT))
    gsc.add_property(SITE)
    gsc.add_rows(
        SITE,
        [
            QueryRow("running shoes", _day(runtime), 120, 2400, 3.2),
            QueryRow("red shoes", _day(runtime), 80, 1000, 2.0),
            QueryRow("trail shoes", _day(runtime), 15, 600, 8.4),
            QueryRow("shoe laces", _day(runtime), 1, 20, 31.0),
        ],
    )


def _rows(text: str) -> dict[str, dict[str, str]]:
    """The preview's rows by query: tracked or not, ticked or not, and the figures' cells."""
    out: dict[str, dict[str, str]] = {}
    for row in re.findall(r'<tr class="rt-gsc-row[^"]*"(.*?)</tr>', text, re.S):
        keyword = html.unescape(re.search(r'data-keyword="([^"]*)"', row).group(1))  # type: ignore[union-attr]
        cells = re.findall(r'<td class="rt-num">([^<]*)</td>', row)
        out[keyword] = {
            "tracked": re.search(r'data-tracked="(\w+)"', row).group(1),  # type: ignore[union-attr]
            "checked": "yes" if " checked" in row else "no",
            "cells": " | ".join(cells),
        }
    return out


def _notice(response: httpx.Response) -> str:
    assert response.status_code in (302, 303), response.text
    location = response.headers["location"]
    return parse_qs(urlsplit(location).query).get("notice", [""])[0]


async def test_rt68_without_a_key_the_page_says_where_to_store_it(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, gsc: SearchConsoleSandbox
) -> None:
    schedule = await make_schedule(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    r = await client.get(f"{UI}/{schedule.id}/search-console")
    assert r.status_code == 200, r.text
    assert 'data-problem="not_configured"' in r.text
    assert 'href="/ui/workspace/secrets"' in r.text
    assert "<code>google_service_account_key</code>" in r.text
    assert 'id="rt-gsc-form"' not in r.text  # nothing to pick from yet
    schedule_page = await client.get(f"{UI}/{schedule.id}")
    assert f'href="{UI}/{schedule.id}/search-console"' in schedule_page.text


async def test_rt68_the_page_lists_properties_and_previews_queries_with_their_figures(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    gsc.add_property("https://www.acme-shop.com/", "siteFullUser")
    schedule = await make_schedule(runtime, tenant)  # red shoes, blue shoes
    await sign_in(client, tenant.email, tenant.password)
    first = await client.get(f"{UI}/{schedule.id}/search-console")
    assert first.status_code == 200, first.text
    assert f'<option value="{SITE}"' in first.text
    assert "https://www.acme-shop.com/ (siteFullUser)" in first.text
    assert "rt-gsc-row" not in first.text  # no preview before a property is chosen
    # The default range: 28 days ending two days ago (Google's final data).
    end = runtime.clock.now().date() - timedelta(days=2)
    assert f'name="end_date" value="{end.isoformat()}"' in first.text
    assert f'name="start_date" value="{(end - timedelta(days=27)).isoformat()}"' in first.text

    r = await client.get(
        f"{UI}/{schedule.id}/search-console",
        params={"site_url": SITE, "min_impressions": "100"},
    )
    assert r.status_code == 200, r.text
    rows = _rows(r.text)
    assert list(rows) == ["running shoes", "red shoes", "trail shoes"]  # shoe laces: 20 < 100
    assert rows["running shoes"] == {
        "tracked": "no",
        "checked": "yes",
        "cells": "120 | 2400 | 5.0 % | 3.2",
    }
    assert (rows["red shoes"]["tracked"], rows["red shoes"]["checked"]) == ("yes", "no")
    assert gsc.count("searchanalytics.query") == 1

    bad = await client.get(
        f"{UI}/{schedule.id}/search-console",
        params={"site_url": SITE, "min_impressions": "many"},
    )
    assert bad.status_code == 200
    assert 'id="rt-gsc-errors"' in bad.text
    assert "Minimum impressions" in bad.text
    assert gsc.count("searchanalytics.query") == 1  # refused before any call


async def test_rt68_the_api_preview_takes_a_minimum_of_impressions(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    schedule = await make_schedule(runtime, tenant)
    body = {"site_url": SITE, "start_date": _day(runtime, 20), "end_date": _day(runtime, 2)}
    url = f"{API}/schedules/{schedule.id}/search-console/preview"
    r = await client.post(url, json={**body, "min_impressions": 600}, headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert [q["keyword"] for q in r.json()["queries"]] == [
        "running shoes",
        "red shoes",
        "trail shoes",
    ]
    negative = await client.post(url, json={**body, "min_impressions": -1}, headers=auth(tenant))
    assert negative.status_code in (400, 422), negative.text
    assert "min_impressions" in negative.text


async def test_rt68_google_refusing_or_not_answering_is_said_on_the_page(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    schedule = await make_schedule(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    url = f"{UI}/{schedule.id}/search-console"
    refused = await client.get(url, params={"site_url": "sc-domain:not-verified.com"})
    assert refused.status_code == 200, refused.text
    assert 'data-problem="refused"' in refused.text
    assert "does not have sufficient permission" in html.unescape(refused.text)
    assert "must be verified" in refused.text

    gsc.inject("searchanalytics.query", delay_seconds=2.0, times=-1)
    slow = await client.get(url, params={"site_url": SITE})
    assert slow.status_code == 200, slow.text
    assert 'data-problem="unavailable"' in slow.text
    assert "did not answer in time" in slow.text
    assert "rt-gsc-row" not in slow.text
    gsc.state.clear_faults()


async def test_rt69_the_ticked_queries_are_added_and_tagged(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, gsc: SearchConsoleSandbox
) -> None:
    await _ready(runtime, tenant, gsc)
    schedule = await make_schedule(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    page = f"{UI}/{schedule.id}/search-console?site_url={SITE}"
    r = await post_form(
        client,
        page,
        f"{UI}/{schedule.id}/search-console",
        keyword=["running shoes", "trail shoes", "red shoes"],
        tag="From GSC",
        site_url=SITE,
    )
    assert r.headers["location"].startswith(f"{UI}/{schedule.id}?")
    assert (
        _notice(r) == "Added 2 keywords from Search Console, tagged “from gsc”; 1 already tracked"
    )
    got = (await client.get(f"{API}/schedules/{schedule.id}", headers=auth(tenant))).json()
    assert got["keywords"] == ["red shoes", "blue shoes", "running shoes", "trail shoes"]
    listed = await client.get(f"{API}/schedules/{schedule.id}/tags", headers=auth(tenant))
    assert listed.json()["tags"] == [{"tag": "from gsc", "keyword_count": 3}]

    # Nothing ticked: back to the preview, saying so, with its range kept.
    empty = await post_form(client, page, f"{UI}/{schedule.id}/search-console", site_url=SITE)
    assert empty.headers["location"].startswith(f"{UI}/{schedule.id}/search-console?site_url=")
    assert "tick at least one query" in _notice(empty)


async def test_rt69_another_workspaces_schedule_is_a_404_on_every_page(
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    client: httpx.AsyncClient,
    gsc: SearchConsoleSandbox,
) -> None:
    await _ready(runtime, tenant, gsc)
    schedule = await make_schedule(runtime, tenant)
    await sign_in(client, other_tenant.email, other_tenant.password)
    page = await client.get(f"{UI}/{schedule.id}/search-console", params={"site_url": SITE})
    assert page.status_code == 404
    token_page = "/ui/ranktracking"
    added = await post_form(
        client, token_page, f"{UI}/{schedule.id}/search-console", keyword=["trail shoes"]
    )
    assert added.status_code == 404
    tagged = await post_form(
        client, token_page, f"{UI}/{schedule.id}/tags", keyword=["red shoes"], tag="brand"
    )
    assert tagged.status_code == 404
    got = (await client.get(f"{API}/schedules/{schedule.id}", headers=auth(tenant))).json()
    assert got["keywords"] == ["red shoes", "blue shoes"]
    listed = await client.get(f"{API}/schedules/{schedule.id}/tags", headers=auth(tenant))
    assert listed.json()["tags"] == []
    assert gsc.count("searchanalytics.query") == 0


async def test_rt70_tags_are_put_on_and_taken_off_from_the_positions_table(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    await sign_in(client, tenant.email, tenant.password)
    page = f"{UI}/{schedule.id}"
    added = await post_form(
        client,
        page,
        f"{page}/tags",
        keyword=["red shoes", "green shoes", "red shoes"],
        tag="Colours",
        change="add",
        back="?device=mobile&sort=position&next=https://evil.example/",
    )
    assert _notice(added) == "Tag “colours” added to 2 keywords"
    location = added.headers["location"]
    assert location.startswith(f"{page}?device=mobile&sort=position&notice=")
    assert "evil" not in location
    shown = await client.get(page)
    assert shown.text.count('class="rt-tag" href=') == 4  # two keywords × two devices
    assert '<option value="colours">colours (2)</option>' in shown.text

    removed = await post_form(
        client, page, f"{page}/tags", keyword=["green shoes"], tag="colours", change="remove"
    )
    assert _notice(removed) == "Tag “colours” removed from 1 keyword"
    unknown = await post_form(
        client, page, f"{page}/tags", keyword=["purple shoes"], tag="colours", change="add"
    )
    assert "not a keyword of this schedule" in _notice(unknown)
    none = await post_form(client, page, f"{page}/tags", tag="colours", change="add")
    assert "tick at least one keyword" in _notice(none)


async def test_rt71_the_table_filtered_by_a_tag_keeps_it_in_its_links_and_charts_it(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    schedule = await seeded_schedule(runtime, tenant, sim)
    await sign_in(client, tenant.email, tenant.password)
    url = f"{UI}/{schedule.id}"
    await post_form(client, url, f"{url}/tags", keyword=["red shoes", "green shoes"], tag="colours")
    await post_form(client, url, f"{url}/tags", keyword=["blue shoes"], tag="blue")
    r = await client.get(url, params={"tag": "colours", "sort": "position"})
    assert r.status_code == 200, r.text
    keywords = set(re.findall(r'<tr class="rt-row" data-keyword="([^"]+)"', r.text))
    assert keywords == {"red shoes", "green shoes"}
    # Sorting links, the CSV export and the filter form keep the tag.
    sort_links = re.findall(r'href="(\?[^"]*)#rt-positions" data-sort=', html.unescape(r.text))
    assert sort_links
    assert all("tag=colours" in link for link in sort_links)
    assert "positions.csv?" in r.text
    assert '<option value="colours" selected>' in r.text
    csv = await client.get(f"{url}/positions.csv", params={"tag": "colours"})
    assert "blue shoes" not in csv.text
    assert "green shoes" in csv.text
    # Paging keeps it too (the page's links are built from the same parameters).
    assert "tag=colours" in TableParams(tag="colours", sort="position").link(page="100")
    assert 'id="rt-trends-tag"' in r.text

    charts = [
        json.loads(html.unescape(c))
        for c in re.findall(r"id=\"rt-tag-chart-\d\" data-chart='([^']*)'", r.text)
    ]
    assert [c["title"] for c in charts] == ["Visibility by tag", "Average position by tag"]
    average = {s["label"]: s["values"] for s in charts[1]["series"]}
    assert set(average) == {
        "blue · desktop",
        "blue · mobile",
        "colours · desktop",
        "colours · mobile",
    }
    # The latest measurement: colours desktop red 4th (green out of the top 10), mobile 1 and 2.
    assert (average["colours · desktop"][-1], average["colours · mobile"][-1]) == (4.0, 1.5)
    trends = [
        json.loads(html.unescape(c))
        for c in re.findall(r"id=\"rt-chart-\d\" data-chart='([^']*)'", r.text)
    ]
    assert trends[1]["title"] == "Average position of the keywords tagged “colours”"

    bad = await client.get(url, params={"tag": "x" * 60})
    assert bad.status_code == 200
    assert 'id="rt-table-errors"' in bad.text
