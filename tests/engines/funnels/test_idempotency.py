"""``Idempotency-Key`` on the Funnels endpoints an outside system may retry: creating a contact,
importing, creating and publishing a funnel, manual entry (listed contacts or a segment),
creating and scheduling a campaign. The same key and body answer the first response and change
nothing; the same key with another body answers 409 and changes nothing either."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.models import Contact, Funnel, FunnelVersion, Run
from app.scheduling.bulk_models import BulkJob
from tests.conftest import auth
from tests.engines.funnels.factories import contact, count, graph, node, published, setup_names

Setup = Callable[[Any, Any], Awaitable[dict[str, Any]]]


async def _nothing(runtime, tenant) -> dict[str, Any]:
    return {}


async def _draft_funnel(runtime, tenant) -> dict[str, Any]:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["hello"])
    from app.engines.funnels.definitions.service import create_funnel, parse_definition

    async with runtime.db.write() as uow:
        funnel = await create_funnel(
            uow.session,
            ws,
            "Draft",
            parse_definition(graph(node("add_tag", "t", tag="hello"))),
            runtime.clock.now(),
        )
    return {"funnel": funnel.id}


async def _live_funnel(runtime, tenant) -> dict[str, Any]:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["hello"])
    funnel_id, _ = await published(runtime, ws, graph(node("add_tag", "t", tag="hello")))
    ann = await contact(runtime, ws, "ann@example.com")
    bob = await contact(runtime, ws, "bob@example.com")
    return {"funnel": funnel_id, "ann": ann, "bob": bob}


async def _draft_campaign(runtime, tenant) -> dict[str, Any]:
    from app.engines.funnels.campaigns.service import CampaignData, create_campaign

    async with runtime.db.write() as uow:
        campaign = await create_campaign(
            uow.session,
            tenant.workspace_id,
            CampaignData(name="News", subject="Hi", body="Hello"),
            runtime.clock.now(),
        )
    return {"campaign": campaign.id}


CASES: list[tuple[str, Setup, str, dict[str, Any], dict[str, Any], Any, int]] = [
    # (name, setup, path, body, other body, model counted, how many after the first request)
    (
        "create_contact",
        _nothing,
        "/api/v1/funnels/contacts",
        {"email": "zoe@example.com"},
        {"email": "yan@example.com"},
        Contact,
        1,
    ),
    (
        "import",
        _nothing,
        "/api/v1/funnels/contacts/import",
        {"csv": "email\na@example.com\nb@example.com\n"},
        {"csv": "email\nc@example.com\n"},
        BulkJob,
        1,
    ),
    (
        "create_funnel",
        _nothing,
        "/api/v1/funnels",
        {"name": "Welcome"},
        {"name": "Other"},
        Funnel,
        1,
    ),
    ("publish", _draft_funnel, "/api/v1/funnels/{funnel}/publish", {}, {"x": 1}, FunnelVersion, 1),
    (
        "manual_entry",
        _live_funnel,
        "/api/v1/funnels/{funnel}/enroll",
        {"contact_ids": ["ann"]},
        {"contact_ids": ["bob"]},
        Run,
        1,
    ),
    (
        "segment_entry",
        _live_funnel,
        "/api/v1/funnels/{funnel}/segment-entries",
        {"segment": {"kind": "field", "field": "email", "op": "eq", "value": "ann@example.com"}},
        {"segment": None},
        Run,
        1,
    ),
    (
        "create_campaign",
        _nothing,
        "/api/v1/funnels/campaigns",
        {"name": "March", "subject": "Hi", "body": "Hello"},
        {"name": "April", "subject": "Hi", "body": "Hello"},
        Campaign,
        1,
    ),
    (
        "schedule_campaign",
        _draft_campaign,
        "/api/v1/funnels/campaigns/{campaign}/schedule",
        {"send_at": "2026-03-03T09:00:00+00:00"},
        {"send_at": "2026-03-04T09:00:00+00:00"},
        Campaign,
        1,
    ),
]


def _fill(value: Any, ids: dict[str, Any]) -> Any:
    if isinstance(value, list):
        return [ids.get(v, v) if isinstance(v, str) else v for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


@pytest.mark.parametrize(
    ("setup", "path", "body", "other", "model", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_retried_requests_take_effect_once(
    client, runtime, tenant, setup: Setup, path, body, other, model, expected
) -> None:
    ids = await setup(runtime, tenant)
    url = path.format(**ids)
    headers = {**auth(tenant), "Idempotency-Key": "retry-7f3a"}
    first = await client.post(url, json=_fill(body, ids), headers=headers)
    assert first.status_code in (200, 201, 202), first.text
    assert await count(runtime, model) == expected
    campaign_status = await _campaign_status(runtime)

    again = await client.post(url, json=_fill(body, ids), headers=headers)
    assert again.status_code == first.status_code
    assert again.json() == first.json()
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert await count(runtime, model) == expected
    assert await _campaign_status(runtime) == campaign_status

    reused = await client.post(url, json=_fill(other, ids), headers=headers)
    assert reused.status_code == 409, reused.text
    assert reused.json()["code"] == "idempotency_key_reused"
    assert await count(runtime, model) == expected
    assert await _campaign_status(runtime) == campaign_status


async def _campaign_status(runtime) -> list[tuple[str, Any]]:
    from sqlalchemy import select

    async with runtime.db.read() as s:
        rows = await s.execute(select(Campaign.status, Campaign.send_at).order_by(Campaign.id))
        return [(r[0], r[1]) for r in rows]


async def test_without_a_key_each_request_takes_effect(client, runtime, tenant) -> None:
    """The key is what makes a retry safe: without it, two imports are two imports."""
    from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT, CONTACTS_IMPORT_JOB
    from app.scheduling.bulk import run_bulk_job

    body = {"csv": "email\na@example.com\n"}
    reports = []
    for _ in range(2):
        job = await client.post("/api/v1/funnels/contacts/import", json=body, headers=auth(tenant))
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        await run_bulk_job(runtime.context(), CONTACTS_IMPORT, job_id, CONTACTS_IMPORT_JOB)
        reports.append(
            (await client.get(f"/api/v1/jobs/{job_id}", headers=auth(tenant))).json()["counters"]
        )
    assert (reports[0]["created"], reports[1]["updated"]) == (1, 1)
    bad = await client.post(
        "/api/v1/funnels/contacts",
        json={"email": "x@example.com"},
        headers={**auth(tenant), "Idempotency-Key": "has space"},
    )
    assert bad.status_code == 422
    assert await count(runtime, Contact) == 1
