"""The funnel editor's message preview: the unsaved step rendered by the renderer sends use, for a
contact of the workspace (their variables, the unsubscribe footer pointing at the test page), as
HTML for the panel; a step that does not decode, a step that sends nothing or another workspace's
contact is a 422 saying so; the contact picker finds contacts by name or address; another
workspace's funnel is a 404. Nothing is stored or sent."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from app.engines.funnels.models import OutboxEffect, Run
from app.runtime import Runtime
from tests.engines.funnels.factories import contact
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in
from tests.web.dashboard.funnels.test_funnel_editor_check import _funnel

EMAIL = {
    "kind": "send_email",
    "id": "hello",
    "subject": "Hi {{first_name}}",
    "body": "Dear {{first_name}} {{last_name}} of {{city}}.",
    "html": "<p>Dear <b>{{first_name}}</b></p>",
}


async def test_the_preview_renders_the_unsaved_step_for_the_contact(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    ws = tenant.workspace_id
    ada = await contact(
        runtime, ws, "ada@example.com", first_name="Ada", last_name="<Lovelace>", fields={}
    )
    await contact(runtime, ws, "grace@example.com", first_name="Grace", last_name="Hopper")
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    headers = {"x-csrf-token": token}
    url = f"/ui/funnels/{funnel_id}/preview"

    answer = await client.post(url, json={"node": EMAIL, "contact_id": ada}, headers=headers)
    assert answer.status_code == 200, answer.text
    assert "<html" not in answer.text
    assert '<pre class="fe-preview-text">Hi Ada</pre>' in answer.text
    # The contact's values are escaped in the page; a field they lack renders empty.
    assert "Dear Ada &lt;Lovelace&gt; of ." in answer.text
    assert "Unsubscribe: http" in answer.text
    assert "/t/u/test-message" in answer.text
    assert "&lt;p&gt;Dear &lt;b&gt;Ada&lt;/b&gt;&lt;/p&gt;" in answer.text  # the HTML part's source
    assert "As Ada &lt;Lovelace&gt; would receive it" in answer.text

    nobody = await client.post(url, json={"node": EMAIL}, headers=headers)
    assert nobody.status_code == 200
    assert "Hi </pre>" in nobody.text
    assert "No contact chosen" in nobody.text

    sms = {"kind": "send_sms", "id": "s", "text": "Code for {{first_name}}"}
    answer = await client.post(url, json={"node": sms, "contact_id": ada}, headers=headers)
    assert '<pre class="fe-preview-text">Code for Ada</pre>' in answer.text

    wrong = await client.post(
        url, json={"node": {**EMAIL, "subject": 5}, "contact_id": ada}, headers=headers
    )
    assert wrong.status_code == 422
    assert (
        "Not previewed: Step &#39;hello&#39; — Subject: enter text; it cannot be empty"
        in wrong.text
    )
    silent = await client.post(
        url, json={"node": {"kind": "wait", "id": "w", "days": 1}}, headers=headers
    )
    assert silent.status_code == 422
    assert "This step sends no message to preview." in silent.text
    bad_shape = await client.post(url, json={"node": EMAIL, "contact_id": "ada"}, headers=headers)
    assert bad_shape.status_code == 422

    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(Run)) == 0
        assert await s.scalar(select(func.count()).select_from(OutboxEffect)) == 0

    picker = await client.get(f"/ui/funnels/{funnel_id}/partials/preview-contacts?q=HOPP")
    assert picker.status_code == 200
    assert "Grace Hopper — grace@example.com" in picker.text
    assert "Ada" not in picker.text
    none = await client.get(f"/ui/funnels/{funnel_id}/partials/preview-contacts?q=zzz")
    assert "No contact matches “zzz”" in none.text


async def test_the_preview_is_the_workspaces_own(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    theirs = await _funnel(runtime, other_tenant)
    stranger = await contact(runtime, other_tenant.workspace_id, "x@example.com", first_name="X")
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    headers = {"x-csrf-token": token}
    answer = await client.post(
        f"/ui/funnels/{funnel_id}/preview",
        json={"node": EMAIL, "contact_id": stranger},
        headers=headers,
    )
    assert answer.status_code == 422
    assert "That contact no longer exists." in answer.text
    assert "X" not in answer.text.replace("X-", "")
    foreign = await client.post(
        f"/ui/funnels/{theirs}/preview", json={"node": EMAIL}, headers=headers
    )
    assert foreign.status_code == 404
    picker = await client.get(f"/ui/funnels/{theirs}/partials/preview-contacts")
    assert picker.status_code == 404
