"""Why a keyword moved (RT-70..RT-75), from runs measured through the SERP simulator: the stored
results page of each keyword and run (compact), who overtook the site, which features appeared or
vanished with their owners, what the AI Overview cites, a changed ranking URL, the pages side by
side, competitors found on the pages, the features over time, and the notes on the charts."""

from __future__ import annotations

import dataclasses

import httpx
from sqlalchemy import func, select

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.explain.retention import purge_snapshots
from app.engines.ranktracking.explain.snapshot import decode
from app.engines.ranktracking.explain_models import SerpSnapshot
from app.engines.ranktracking.reports.charts import keyword_chart, schedule_charts
from app.platform.audit.models import AuditEntry
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.conftest import auth
from tests.engines.ranktracking.factories import (
    DOMAIN,
    RIVAL,
    explained_schedule,
    measure_once,
)
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


async def _two_runs(runtime: Runtime, tenant: Tenant, sim: SerpSimulator) -> int:
    return (await explained_schedule(runtime, tenant, sim)).id


async def test_rt70_a_compact_snapshot_per_keyword_and_run(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-70: each retrieved keyword of each run keeps its page: the top 100 organic URLs with
    their domains, every feature with the domains it links to, the AI Overview's references."""
    await _two_runs(runtime, tenant, sim)
    async with runtime.db.read() as s:
        bodies = list(await s.scalars(select(SerpSnapshot.body).order_by(SerpSnapshot.result_id)))
    assert len(bodies) == 4  # two keywords, two runs, one device
    latest = decode(bodies[2])
    assert len(latest.organic) == 100
    assert latest.organic[1] == (RIVAL, f"https://{RIVAL}/red-shoes")
    assert latest.position_of(DOMAIN) == 5
    assert latest.organic[4] == (DOMAIN, f"https://{DOMAIN}/shoes-sale")
    assert latest.features["ai_overview"] == [RIVAL, "wiki-shoes.org"]
    assert latest.features["video"] == ["youtube.com"]
    assert latest.features["local_pack"] == [RIVAL]
    assert latest.ai_references == [
        (RIVAL, f"https://{RIVAL}/red-shoes"),
        ("wiki-shoes.org", "https://wiki-shoes.org/red-shoes"),
    ]
    # Compact: a 100-result page with its features in a few kilobytes.
    assert max(len(b) for b in bodies) < 4000, [len(b) for b in bodies]


async def test_rt71_a_movement_explained(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-71: who overtook the site, which features appeared or vanished and who owns them, the
    AI Overview's references, the changed ranking URL, and both pages side by side."""
    schedule_id = await _two_runs(runtime, tenant, sim)
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/movements",
        params={"keyword": " Red  Shoes "},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert len(items) == 1
    m = items[0]
    assert (m["previous"], m["position"], m["change"], m["delta"]) == (3, 5, "down", -2)
    assert m["url_changed"] is True
    assert m["previous_url"].endswith("/red-shoes")
    assert m["url"].endswith("/shoes-sale")
    assert m["overtaken_by"][0] == {"domain": RIVAL, "before": 8, "after": 2}
    assert all(o["after"] < 5 for o in m["overtaken_by"])
    changes = {f["feature"]: f for f in m["features"]}
    assert changes["featured_snippet"]["change"] == "vanished"
    assert changes["ai_overview"]["change"] == "appeared"
    assert changes["ai_overview"]["owners_after"] == [RIVAL, "wiki-shoes.org"]
    assert changes["local_pack"]["owners_after"] == [RIVAL]
    assert changes["video"]["owners_after"] == ["youtube.com"]
    ai = m["ai_overview"]
    assert (ai["before"], ai["after"], ai["cited_after"]) == (False, True, False)
    assert ai["references_added"] == [RIVAL, "wiki-shoes.org"]
    assert m["pages_kept"] is True
    diff = {row["rank"]: row for row in m["diff"]}
    assert len(diff) == 10
    assert diff[2]["after"] == RIVAL
    assert diff[3]["mine_before"]
    assert diff[5]["mine_after"]
    reasons = m["reasons"]
    assert reasons[0] == "Down 2 places: 3 → 5."
    assert any(r.startswith("Your ranking page changed:") for r in reasons)
    assert f"{RIVAL} overtook you (8 → 2)." in reasons
    assert f"An AI Overview appeared (links to {RIVAL}, wiki-shoes.org)." in reasons
    assert "The featured snippet vanished." in reasons
    assert f"The AI Overview cites {RIVAL}, wiki-shoes.org, not you." in reasons

    # The AI Overview cites the site in the next measurement: said so.
    sim.script("red shoes", features=["ai_overview", "local_pack", "video"], ai_references=[DOMAIN])
    await measure_once(runtime, schedule_id)
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/movements",
        params={"keyword": "red shoes"},
        headers=auth(tenant),
    )
    newest = r.json()["items"][0]
    assert newest["change"] == "same"
    assert "The AI Overview now cites your site." in newest["reasons"]
    assert [f["change"] for f in newest["features"]] == ["owners_changed"]


async def test_rt72_competitors_discovered_across_the_keywords(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-72: the domains above the tracked one on the most pages of the latest measurement."""
    schedule_id = await _two_runs(runtime, tenant, sim)
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/competitors/discovered", headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["pages"] == 2
    top = body["items"][0]
    assert top["domain"] == RIVAL
    assert (top["above"], top["share"], top["average_position"]) == (2, 100.0, 1.5)
    assert top["tracked"] is False
    assert all(i["domain"] != DOMAIN for i in body["items"])
    await client.put(
        f"{BASE}/schedules/{schedule_id}/competitors",
        json={"domains": [RIVAL]},
        headers=auth(tenant),
    )
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/competitors/discovered",
        params={"limit": 1},
        headers=auth(tenant),
    )
    assert r.json()["items"] == [{**top, "tracked": True}]
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/competitors/discovered",
        params={"limit": 0},
        headers=auth(tenant),
    )
    assert r.status_code == 400 or r.status_code == 422


async def test_rt74_feature_history(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-74: a keyword's features per measurement, the owned ones, the AI Overview's citing."""
    schedule_id = await _two_runs(runtime, tenant, sim)
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/features",
        params={"keyword": "red shoes"},
        headers=auth(tenant),
    )
    body = r.json()
    assert body["features"] == ["ai_overview", "featured_snippet", "local_pack", "video"]
    first, second = body["points"]
    assert first["features"] == ["featured_snippet"]
    assert first["cited_in_ai_overview"] is None
    assert second["features"] == ["ai_overview", "local_pack", "video"]
    assert second["cited_in_ai_overview"] is False
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/features", params={"keyword": " "}, headers=auth(tenant)
    )
    assert r.status_code == 422
    assert "keyword" in r.text


async def test_rt73_notes_on_the_charts(
    client: httpx.AsyncClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    sim: SerpSimulator,
) -> None:
    """RT-73: notes written, listed, changed and deleted through the API (audited, scoped by
    workspace), shown on the keyword's and the schedule's charts beside the automatic ones."""
    schedule_id = await _two_runs(runtime, tenant, sim)
    h = auth(tenant)
    url = f"{BASE}/schedules/{schedule_id}/annotations"
    r = await client.post(
        url,
        json={"at": "2026-01-01T00:00:00Z", "text": "New titles", "keyword": "Red Shoes"},
        headers=h,
    )
    assert r.status_code == 201, r.text
    mine = r.json()
    assert mine["keyword"] == "red shoes"
    r = await client.post(url, json={"at": "2026-01-02T00:00:00Z", "text": "Migration"}, headers=h)
    everywhere = r.json()
    assert everywhere["keyword"] is None
    r = await client.post(url, json={"at": "2026-01-02T00:00:00Z", "text": "  "}, headers=h)
    assert r.status_code == 422
    assert "text" in r.text
    r = await client.post(url, json={"at": "yesterday", "text": "x"}, headers=h)
    assert r.status_code in (400, 422)

    listed = (await client.get(url, params={"keyword": "red shoes"}, headers=h)).json()
    assert [a["text"] for a in listed] == ["New titles", "Migration"]
    listed = (await client.get(url, params={"keyword": "blue shoes"}, headers=h)).json()
    assert [a["text"] for a in listed] == ["Migration"]

    r = await client.patch(f"{url}/{mine['id']}", json={"text": "New title tags"}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "New title tags"

    # Another workspace sees neither the schedule nor its notes.
    other = auth(other_tenant)
    assert (await client.get(url, headers=other)).status_code == 404
    r = await client.patch(f"{url}/{mine['id']}", json={"text": "x"}, headers=other)
    assert r.status_code == 404
    assert (await client.delete(f"{url}/{mine['id']}", headers=other)).status_code == 404
    assert (await client.delete(f"{url}/999999", headers=h)).status_code == 404

    async with runtime.db.read() as s:
        chart = await keyword_chart(s, schedule_id, "red shoes")
        charts = await schedule_charts(s, schedule_id)
        actions = list(
            await s.scalars(
                select(AuditEntry.action).where(AuditEntry.action.like("rank_annotation.%"))
            )
        )
    labels = [(n.kind, n.label) for n in chart.notes]
    assert ("user", "New title tags") in labels
    assert ("user", "Migration") in labels
    assert ("auto", "AI Overview appeared") in labels
    assert ("auto", "Featured snippet vanished") in labels
    assert ("auto", "Ranking URL changed") in labels
    schedule_labels = [(n.kind, n.label) for n in charts[0].notes]
    assert ("user", "Migration") in schedule_labels
    assert ("user", "New title tags") not in schedule_labels
    assert ("auto", "AI Overview appeared for 1 keyword") in schedule_labels

    assert (await client.delete(f"{url}/{mine['id']}", headers=h)).status_code == 204
    listed = (await client.get(url, headers=h)).json()
    assert [a["text"] for a in listed] == ["Migration"]
    assert sorted(actions) == [
        "rank_annotation.created",
        "rank_annotation.created",
        "rank_annotation.updated",
    ]


async def test_rt70_snapshots_kept_for_the_retention_only(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """RT-70: pages older than RT_SNAPSHOT_RETENTION_DAYS are deleted by the sweep; a movement is
    still explained from the positions, URLs and feature types kept on the results."""
    schedule_id = await _two_runs(runtime, tenant, sim)
    deps = RankTrackingDeps.of(runtime)
    rt = dataclasses.replace(runtime.settings.ranktracking, snapshot_retention_days=1)
    deps = dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, ranktracking=rt))
    # The first run's pages are two days old, the second's one day: only the first go.
    assert await purge_snapshots(deps, runtime.clock.now()) == 2
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(SerpSnapshot)) == 2
    r = await client.get(
        f"{BASE}/schedules/{schedule_id}/movements",
        params={"keyword": "red shoes"},
        headers=auth(tenant),
    )
    m = r.json()["items"][0]
    assert m["pages_kept"] is False
    assert m["diff"] == []
    assert m["overtaken_by"] == []
    assert m["url_changed"] is True
    assert {f["feature"]: f["change"] for f in m["features"]} == {
        "ai_overview": "appeared",
        "local_pack": "appeared",
        "video": "appeared",
        "featured_snippet": "vanished",
    }
    # 0 days: pages are not stored at all.
    off = dataclasses.replace(runtime.settings.ranktracking, snapshot_retention_days=0)
    assert (
        await purge_snapshots(
            dataclasses.replace(
                deps, settings=dataclasses.replace(deps.settings, ranktracking=off)
            ),
            runtime.clock.now(),
        )
        == 2
    )
