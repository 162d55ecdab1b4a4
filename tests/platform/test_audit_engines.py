"""The audit log records each engine's side-effecting actions through HTTP (issue 31, item 1):
stops, ad rules, funnels, campaigns, rank schedules and their exports, contact exports and
erasure (the platform's own families: test_audit_log.py)."""

from __future__ import annotations

from datetime import timedelta

import httpx

from app.clock import ManualClock
from app.platform import audit
from app.runtime import Runtime
from tests.engines.adrules.factories import create_account
from tests.factories import Tenant
from tests.platform.audit_support import entries, key_headers, one


async def test_workspace_stop_set_and_cleared_are_recorded(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    stop = {"scope": "workspace", "stopped": True, "reason": "bad rule"}
    r = await client.post("/api/v1/adrules/stop", json=stop, headers=key_headers(tenant))
    assert r.status_code == 200, r.text
    entry = await one(runtime, "stop.set")
    assert (entry.object_type, entry.after) == ("workspace_stop", {"reason": "bad rule"})
    stop["stopped"] = False
    await client.post("/api/v1/adrules/stop", json=stop, headers=key_headers(tenant))
    await one(runtime, "stop.cleared")


async def test_ad_rule_created_active_then_paused_and_activated_is_recorded(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    from tests.engines.adrules.factories import rule_body

    account = await create_account(runtime, workspace_id=tenant.workspace_id, meta_id="act_1")
    r = await client.post(
        "/api/v1/adrules/rules",
        json=rule_body(status="active", account_ids=[account.id]),
        headers=key_headers(tenant),
    )
    assert r.status_code == 201, r.text
    rule_id = r.json()["id"]
    created = await one(runtime, "adrule.created")
    assert created.after == {"status": "active", "name": "Spend watch"}
    base = f"/api/v1/adrules/rules/{rule_id}/status"
    for status in ("paused", "active"):
        assert (
            await client.post(base, json={"status": status}, headers=key_headers(tenant))
        ).status_code == 200
    changes = await entries(runtime, "adrule.status_changed")
    assert [(e.before, e.after["status"]) for e in changes if e.after] == [
        ({"status": "active"}, "paused"),
        ({"status": "paused"}, "active"),
    ]


WELCOME = {
    "triggers": [{"kind": "manual"}],
    "nodes": [
        {"kind": "send_email", "id": "hello", "entry": True, "subject": "Hi", "body": "Welcome"}
    ],
}


async def test_funnel_publish_pause_and_activate_are_recorded(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    api = "/api/v1/funnels"
    created = await client.post(
        api, json={"name": "Welcome", "definition": WELCOME}, headers=key_headers(tenant)
    )
    assert created.status_code == 201, created.text
    fid = created.json()["id"]
    assert (
        await client.post(f"{api}/{fid}/publish", json={}, headers=key_headers(tenant))
    ).status_code == 201
    published = await one(runtime, "funnel.published")
    assert published.after == {"name": "Welcome", "version": 1}
    for active in (False, True):
        r = await client.patch(f"{api}/{fid}", json={"active": active}, headers=key_headers(tenant))
        assert r.status_code == 200, r.text
    assert [e.action for e in await entries(runtime) if e.object_type == "funnel"] == [
        "funnel.published",
        "funnel.paused",
        "funnel.activated",
    ]


async def test_campaign_schedule_send_and_cancel_are_recorded(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, clock: ManualClock
) -> None:
    api = "/api/v1/funnels/campaigns"
    body = {"name": "March news", "subject": "News", "body": "Hello"}
    c = (await client.post(api, json=body, headers=key_headers(tenant))).json()
    later = (clock.now() + timedelta(hours=1)).isoformat()
    r = await client.post(
        f"{api}/{c['id']}/schedule", json={"send_at": later}, headers=key_headers(tenant)
    )
    assert r.status_code == 200, r.text
    scheduled = await one(runtime, "campaign.scheduled")
    assert scheduled.after is not None
    assert scheduled.after["status"] == "scheduled"
    r = await client.post(f"{api}/{c['id']}/schedule", json={}, headers=key_headers(tenant))
    assert r.status_code == 200, r.text
    await one(runtime, "campaign.sent")
    await client.post(f"{api}/{c['id']}/cancel", json={}, headers=key_headers(tenant))
    await one(runtime, "campaign.cancelled")


async def test_rank_schedule_pause_resume_end_and_csv_exports_are_recorded(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    base = "/api/v1/ranktracking"
    h = key_headers(tenant)
    r = await client.post(
        f"{base}/lists", json={"name": "Main", "keywords": ["red shoes"]}, headers=h
    )
    list_id = r.json()["list"]["id"]
    body = {
        "name": "Shoes",
        "data_type": "serp",
        "frequency": "weekly",
        "depth": "top10",
        "location_code": 2840,
        "language_code": "en",
        "domain": "acme-shop.com",
        "devices": ["desktop"],
        "list_id": list_id,
    }
    r = await client.post(f"{base}/schedules", json=body, headers=h)
    assert r.status_code == 201, r.text
    sid = r.json()["schedule"]["id"]
    for verb in ("pause", "resume"):
        assert (await client.post(f"{base}/schedules/{sid}/{verb}", headers=h)).status_code == 200
    assert (await client.get(f"{base}/schedules/{sid}/positions.csv", headers=h)).status_code == 200
    assert (await client.get(f"{base}/schedules/{sid}/log.csv", headers=h)).status_code == 200
    assert (await client.post(f"{base}/schedules/{sid}/end", headers=h)).status_code == 200
    assert [e.action for e in await entries(runtime) if e.object_type == "rank_schedule"] == [
        "rank_schedule.paused",
        "rank_schedule.resumed",
        "rank_schedule.positions_exported",
        "rank_schedule.log_exported",
        "rank_schedule.ended",
    ]
    ended = await one(runtime, "rank_schedule.ended")
    assert (ended.before, ended.after) == ({"status": "active"}, {"status": "archived"})


async def test_contact_export_and_erasure_are_recorded_and_erasure_redacts_addresses(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    api = "/api/v1/funnels/contacts"
    r = await client.post(api, json={"email": "ada@example.com"}, headers=key_headers(tenant))
    contact_id = r.json()["id"]
    # An entry that quotes the address (as an invitation to it would).
    async with runtime.db.write() as uow:
        await audit.record(
            uow.session,
            action="invitation.created",
            object_type="invitation",
            object_id=9,
            workspace_id=tenant.workspace_id,
            after={"email": "ada@example.com", "role": "member"},
            now=runtime.clock.now(),
            actor=audit.Actor("user", tenant.user_id),
        )
    assert (
        await client.get(f"{api}/{contact_id}/export", headers=key_headers(tenant))
    ).status_code == 200
    assert (
        await client.delete(f"{api}/{contact_id}", headers=key_headers(tenant))
    ).status_code == 204
    assert (await one(runtime, "contact.exported")).object_id == str(contact_id)
    assert (await one(runtime, "contact.erased")).object_id == str(contact_id)
    redacted = await one(runtime, "invitation.created")
    assert redacted.after == {"erased": True}
