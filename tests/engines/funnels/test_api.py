"""The Funnels JSON API: contacts (create, update, list, delete; CSV import is in test_contact_import),
funnels (drafts, validation naming node and rule, publish, immutable versions), manual entry,
runs with steps, timelines; errors in the project's format; other workspaces answer 404."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

from app.engines.funnels.contacts.segments import window_start
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.work.runner import Runner
from app.runtime import Runtime
from app.settings import FunnelSettings
from tests.conftest import auth
from tests.factories import Tenant

API = "/api/v1/funnels"

WELCOME: dict[str, Any] = {
    "triggers": [{"kind": "manual"}],
    "nodes": [
        {
            "kind": "send_email",
            "id": "hello",
            "entry": True,
            "subject": "Hi {{first_name}}",
            "body": "Welcome",
            "next": "w",
        },
        {"kind": "wait", "id": "w", "days": 1},
    ],
}


async def _post(client: httpx.AsyncClient, tenant: Tenant, path: str, body: Any) -> httpx.Response:
    return await client.post(f"{API}{path}", json=body, headers=auth(tenant))


async def test_contacts_crud_and_errors(
    client: httpx.AsyncClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    assert (
        await _post(client, tenant, "/fields", {"key": "plan", "type": "text"})
    ).status_code == 201
    assert (
        await _post(client, tenant, "/fields", {"key": "orders", "type": "number"})
    ).status_code == 201
    created = await _post(
        client,
        tenant,
        "/contacts",
        {
            "email": "Ada@Example.com",
            "first_name": "Ada",
            "timezone": "Europe/Berlin",
            "fields": {"plan": "pro", "orders": 3},
            "tags": ["vip"],
            "lists": ["Newsletter"],
            "consent": {"email": "granted"},
        },
    )
    assert created.status_code == 201, created.text
    contact = created.json()
    assert contact["email"] == "ada@example.com"
    assert (contact["tags"], contact["lists"]) == (["vip"], ["Newsletter"])

    duplicate = await _post(client, tenant, "/contacts", {"email": "ada@example.com"})
    assert duplicate.status_code == 409
    assert duplicate.json()["code"] == "duplicate_contact"

    bad_type = await _post(
        client, tenant, "/contacts", {"email": "b@x.test", "fields": {"orders": "many"}}
    )
    assert bad_type.status_code == 422
    assert bad_type.json()["details"][0]["field"] == "fields.orders"
    unknown_field = await _post(
        client, tenant, "/contacts", {"email": "b@x.test", "fields": {"ghost": 1}}
    )
    assert unknown_field.status_code == 422
    bad_tz = await _post(
        client, tenant, "/contacts", {"email": "b@x.test", "timezone": "Mars/Olympus"}
    )
    assert bad_tz.status_code == 422
    unknown_key = await _post(client, tenant, "/contacts", {"email": "b@x.test", "colour": "red"})
    assert unknown_key.status_code == 422

    cid = contact["id"]
    patched = await client.patch(
        f"{API}/contacts/{cid}",
        json={"tags": ["customer"], "fields": {"orders": 4}},
        headers=auth(tenant),
    )
    assert patched.status_code == 200
    assert patched.json()["tags"] == ["customer"]
    assert patched.json()["fields"] == {"plan": "pro", "orders": 4}

    for i in range(3):
        await _post(client, tenant, "/contacts", {"email": f"p{i}@x.test"})
    page = (await client.get(f"{API}/contacts?limit=2", headers=auth(tenant))).json()
    assert len(page["items"]) == 2
    rest = (
        await client.get(
            f"{API}/contacts?limit=2&cursor={page['next_cursor']}", headers=auth(tenant)
        )
    ).json()
    assert len(rest["items"]) == 2
    assert rest["next_cursor"] is None

    assert (
        await client.get(f"{API}/contacts/{cid}", headers=auth(other_tenant))
    ).status_code == 404
    assert (
        await client.delete(f"{API}/contacts/{cid}", headers=auth(other_tenant))
    ).status_code == 404
    assert (await client.delete(f"{API}/contacts/{cid}", headers=auth(tenant))).status_code == 204
    assert (await client.get(f"{API}/contacts/{cid}", headers=auth(tenant))).status_code == 404


async def test_funnel_draft_validate_publish_versions(
    client: httpx.AsyncClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    """FN-1, FN-21..26 through the API: an invalid draft is refused with problems naming node
    and rule; a valid one becomes version 1, then 2; versions never change."""
    broken = {
        "nodes": [
            {
                "kind": "send_email",
                "id": "a",
                "entry": True,
                "subject": "Hi {{frist_name}}",
                "body": "",
            }
        ]
    }
    created = await _post(client, tenant, "", {"name": "Welcome", "definition": broken})
    assert created.status_code == 201, created.text
    fid = created.json()["id"]
    verdict = (await _post(client, tenant, f"/{fid}/validate", {})).json()
    assert verdict["valid"] is False
    assert {(p["node_id"], p["rule"]) for p in verdict["problems"]} == {
        ("a", "FN-24"),
        ("a", "FN-25"),
    }
    refused = await _post(client, tenant, f"/{fid}/publish", {})
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_graph"
    assert {d["rule"] for d in refused.json()["details"]} == {"FN-24", "FN-25"}

    schema_error = await client.patch(
        f"{API}/{fid}",
        json={"definition": {"nodes": [{"kind": "teleport", "id": "x"}]}},
        headers=auth(tenant),
    )
    assert schema_error.status_code == 422

    assert (
        await client.patch(f"{API}/{fid}", json={"definition": WELCOME}, headers=auth(tenant))
    ).status_code == 200
    v1 = await _post(client, tenant, f"/{fid}/publish", {})
    assert v1.status_code == 201
    assert v1.json()["number"] == 1
    edited = {
        **WELCOME,
        "nodes": [{**WELCOME["nodes"][0], "subject": "Changed"}, WELCOME["nodes"][1]],
    }
    await client.patch(f"{API}/{fid}", json={"definition": edited}, headers=auth(tenant))
    frozen = (await client.get(f"{API}/{fid}/versions/1", headers=auth(tenant))).json()
    assert frozen["definition"]["nodes"][0]["subject"] == "Hi {{first_name}}"
    v2 = (await _post(client, tenant, f"/{fid}/publish", {})).json()
    assert v2["number"] == 2
    versions = (await client.get(f"{API}/{fid}/versions", headers=auth(tenant))).json()
    assert [v["number"] for v in versions] == [2, 1]
    assert (await client.get(f"{API}/{fid}", headers=auth(other_tenant))).status_code == 404
    assert (await _post(client, other_tenant, f"/{fid}/publish", {})).status_code == 404


async def test_enroll_runs_steps_and_timeline(
    client: httpx.AsyncClient, tenant: Tenant, runtime: Runtime
) -> None:
    fid = (await _post(client, tenant, "", {"name": "Welcome", "definition": WELCOME})).json()["id"]
    not_published = await _post(client, tenant, f"/{fid}/enroll", {"contact_ids": [1]})
    assert not_published.status_code == 409
    await _post(client, tenant, f"/{fid}/publish", {})
    ids = [
        (
            await _post(
                client, tenant, "/contacts", {"email": f"c{i}@x.test", "first_name": f"C{i}"}
            )
        ).json()["id"]
        for i in range(3)
    ]
    assert (await _post(client, tenant, f"/{fid}/enroll", {})).status_code == 422
    entered = await _post(
        client,
        tenant,
        f"/{fid}/enroll",
        {"predicate": {"kind": "field", "field": "first_name", "op": "ne", "value": "C2"}},
    )
    assert entered.json() == {"started": 2, "job": None}
    again = await _post(client, tenant, f"/{fid}/enroll", {"contact_ids": ids})
    assert again.json() == {"started": 1, "job": None}  # one run per contact per funnel

    runner = Runner(runtime.db, FunnelSettings(), mail_domain="x.test", executors=EXECUTORS)
    await runner.run_batch(owner="t", now=runtime.clock.now())
    runs = (await client.get(f"{API}/{fid}/runs", headers=auth(tenant))).json()["items"]
    assert len(runs) == 3
    assert {r["current_node"] for r in runs} == {"w"}
    detail = (await client.get(f"{API}/runs/{runs[0]['id']}", headers=auth(tenant))).json()
    assert [s["node_id"] for s in detail["steps"]] == ["hello", "w"]
    assert detail["effects"][0]["channel"] == "email"
    timeline = (
        await client.get(f"{API}/contacts/{runs[0]['contact_id']}/timeline", headers=auth(tenant))
    ).json()
    kinds = {e["kind"] for e in timeline["entries"]}
    assert {"event", "step"} <= kinds

    funnels = (await client.get(API, headers=auth(tenant))).json()
    assert funnels[0]["runs"] == {"active": 3}
    assert funnels[0]["current_version"] == 1


async def test_segment_preview(client: httpx.AsyncClient, tenant: Tenant) -> None:
    for i, tags in enumerate((["vip"], [], ["vip"])):
        await _post(client, tenant, "/contacts", {"email": f"s{i}@x.test", "tags": tags})
    preview = await _post(
        client, tenant, "/segments/preview", {"predicate": {"kind": "has_tag", "tag": "vip"}}
    )
    assert preview.json()["count"] == 2
    bad = await _post(
        client,
        tenant,
        "/segments/preview",
        {"predicate": {"kind": "field", "field": "ghost", "op": "eq", "value": 1}},
    )
    assert bad.status_code == 422


async def test_an_event_count_window_reaching_past_the_calendar_counts_every_event(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """``within_days`` may be as large as any count; a window that reaches back before the
    first day a date can hold counts every event (it was a 500: the date overflowed)."""
    for i in range(2):
        await _post(client, tenant, "/contacts", {"email": f"w{i}@x.test"})
    for days in (2_384_738, 2**31 - 1):
        predicate = {
            "kind": "event_count",
            "event": "order_placed",
            "op": "eq",
            "count": 0,
            "within_days": days,
        }
        preview = await _post(client, tenant, "/segments/preview", {"predicate": predicate})
        assert preview.status_code == 200, preview.text
        assert preview.json()["count"] == 2


def test_the_event_count_window_start() -> None:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    assert window_start(now, None) is None
    assert window_start(now, 0) is None
    assert window_start(now, 7) == datetime(2026, 11, 25, tzinfo=UTC)
    assert window_start(now, 800_000) is None  # before year 1
    assert window_start(now, 2**31 - 1) is None  # past what a timedelta holds
