"""Drafting with AI from the API and the dashboard (FN-34 to FN-36): the same service answers
both; the new funnel opens in the editor as a draft with its record (prompt, model, endpoint,
tokens, rounds) and the sample simulation beside it; refusals are clear and write nothing;
another workspace's record is 404."""

from __future__ import annotations

from urllib.parse import unquote

import httpx
from sqlalchemy import func, select

from app.engines.funnels.drafting.models import AiDraft
from app.engines.funnels.models import Funnel, FunnelVersion
from app.engines.funnels.outside import ai_ledger
from app.integrations.http_guard import GUARD_RESOURCE, AddressGuard
from app.platform.audit.models import AuditEntry
from app.runtime import Runtime
from app.sandbox.ai import AiSandbox
from tests.engines.funnels.drafting.conftest import configure_ai
from tests.factories import Tenant

BASE = "/api/v1/funnels"


def auth(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.api_key}"}


async def ready(runtime: Runtime, tenant: Tenant, ai: AiSandbox) -> None:
    # The operator allows the loopback simulator as a target (OUTBOUND_ALLOW_PRIVATE).
    runtime.resources.put(GUARD_RESOURCE, AddressGuard(allow_private=True))
    await configure_ai(runtime, tenant.workspace_id, ai.url)


async def count(runtime: Runtime, model: object) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(model)) or 0)  # type: ignore[arg-type]


async def test_fn35_api_drafts_and_shows_the_record(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant, ai: AiSandbox
) -> None:
    """FN-35: ``POST /api/v1/funnels/ai-drafts`` answers the record; the funnel is a draft
    (no version); ``GET …/{id}/ai-draft`` shows it, 404 from another workspace."""
    await ready(runtime, tenant, ai)
    made = await client.post(
        f"{BASE}/ai-drafts",
        json={
            "description": "Bienvenue puis conseils sandbox:repair",
            "trigger": {"kind": "contact_created"},
            "channels": ["email"],
        },
        headers=auth(tenant),
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["outcome"] == "repaired"
    assert len(body["rounds"]) == 2
    assert body["model"] == "gpt-4o-mini"
    assert body["endpoint"] == f"{ai.url}/v1/chat/completions"
    assert body["total_tokens"] == ai.tokens_billed
    assert body["editor_url"] == f"/ui/funnels/{body['funnel_id']}"
    assert body["simulation"]["contacts"] == 20
    funnel = await client.get(f"{BASE}/{body['funnel_id']}", headers=auth(tenant))
    assert funnel.status_code == 200
    assert await count(runtime, FunnelVersion) == 0
    shown = await client.get(f"{BASE}/{body['funnel_id']}/ai-draft", headers=auth(tenant))
    assert shown.status_code == 200
    assert shown.json()["description"] == "Bienvenue puis conseils sandbox:repair"
    foreign = await client.get(f"{BASE}/{body['funnel_id']}/ai-draft", headers=auth(other_tenant))
    assert foreign.status_code == 404
    # The key that asked is in the audit trail.
    async with runtime.db.read() as s:
        entry = await s.scalar(select(AuditEntry).where(AuditEntry.action == "funnel.ai_drafted"))
    assert entry is not None
    assert entry.actor_kind == "api_key"
    assert entry.after is not None
    assert entry.after["outcome"] == "repaired"


async def test_fn36_api_refusals_are_clear_and_write_nothing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, ai: AiSandbox
) -> None:
    """FN-36: no provider 409, a bad request names the field, quota spent 429, garbage 502;
    nothing is written in any case."""
    no_provider = await client.post(
        f"{BASE}/ai-drafts",
        json={"description": "Hi", "trigger": {"kind": "manual"}},
        headers=auth(tenant),
    )
    assert no_provider.status_code == 409
    assert no_provider.json()["code"] == "ai_provider_missing"
    await ready(runtime, tenant, ai)
    bad = await client.post(
        f"{BASE}/ai-drafts",
        json={"description": "", "trigger": {"kind": "manual"}},
        headers=auth(tenant),
    )
    assert bad.status_code in (400, 422)
    assert "description" in bad.text
    garbage = await client.post(
        f"{BASE}/ai-drafts",
        json={"description": "sandbox:garbage", "trigger": {"kind": "manual"}},
        headers=auth(tenant),
    )
    assert garbage.status_code == 502
    assert garbage.json()["code"] == "ai_draft_failed"
    async with runtime.db.write() as uow:
        await ai_ledger.set_quota(uow.session, tenant.organisation_id, 0, runtime.clock.now())
    spent = await client.post(
        f"{BASE}/ai-drafts",
        json={"description": "Hi", "trigger": {"kind": "manual"}},
        headers=auth(tenant),
    )
    assert spent.status_code == 429
    assert spent.json()["code"] == "ai_quota_exhausted"
    assert await count(runtime, Funnel) == 0
    assert await count(runtime, AiDraft) == 0


async def test_fn35_dashboard_draft_opens_in_the_editor(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, ai: AiSandbox
) -> None:
    """FN-35: "Draft with AI" from the funnel list; the draft opens in the editor with the
    record and the simulation of 20 sample contacts; the remaining findings are pinned on the
    steps; nothing is published."""
    from tests.platform.conftest import csrf_from, sign_in

    await ready(runtime, tenant, ai)
    await sign_in(client, tenant.email, tenant.password)
    listing = await client.get("/ui/funnels")
    assert 'href="/ui/funnels/draft-with-ai"' in listing.text
    form = await client.get("/ui/funnels/draft-with-ai")
    assert form.status_code == 200
    posted = await client.post(
        "/ui/funnels/draft-with-ai",
        data={
            "_csrf_token": csrf_from(form.text),
            "description": "Welcome sequence sandbox:hopeless",
            "trigger": "manual",
            "channel_email": "on",
        },
    )
    assert posted.status_code in (302, 303), posted.text
    location = posted.headers["location"]
    assert "problems" in unquote(location)
    editor = await client.get(location)
    assert editor.status_code == 200
    assert 'id="ai-draft"' in editor.text
    assert "Welcome sequence sandbox:hopeless" in editor.text
    assert f"{ai.url}/v1/chat/completions" in editor.text
    assert 'id="ai-sim-table"' in editor.text
    assert editor.text.count("Sample") >= 20
    # The validator's findings are pinned on the step they concern.
    assert 'class="problem" data-node="welcome"' in editor.text
    assert await count(runtime, FunnelVersion) == 0


async def test_fn36_dashboard_refusal_keeps_the_form(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, ai: AiSandbox
) -> None:
    """FN-36: a spent quota shows the form again, as typed, with the reason; nothing written."""
    from tests.platform.conftest import csrf_from, sign_in

    await ready(runtime, tenant, ai)
    async with runtime.db.write() as uow:
        await ai_ledger.set_quota(uow.session, tenant.organisation_id, 0, runtime.clock.now())
    await sign_in(client, tenant.email, tenant.password)
    form = await client.get("/ui/funnels/draft-with-ai")
    posted = await client.post(
        "/ui/funnels/draft-with-ai",
        data={
            "_csrf_token": csrf_from(form.text),
            "description": "Relance des paniers abandonnés",
            "trigger": "api_event",
            "trigger_value": "cart_abandoned",
            "channel_sms": "on",
        },
    )
    assert posted.status_code == 429
    assert "AI quota is spent" in posted.text
    assert "Relance des paniers abandonnés" in posted.text
    assert 'value="cart_abandoned"' in posted.text
    missing = await client.post(
        "/ui/funnels/draft-with-ai",
        data={"_csrf_token": csrf_from(form.text), "description": "x", "trigger": "tag_added"},
    )
    assert missing.status_code == 422
    assert "Trigger: this trigger needs its tag named." in missing.text
    assert await count(runtime, Funnel) == 0
