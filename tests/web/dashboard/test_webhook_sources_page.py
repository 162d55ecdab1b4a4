"""The "Webhook sources" settings page: sources added, given a new secret and removed with forms
(no JSON); a generated secret is shown once and never again; a refused form keeps what was typed
and names the field by its label; members read the page but change nothing."""

from __future__ import annotations

import re

import httpx

from app.runtime import Runtime
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in

PAGE = "/ui/workspace/webhook-sources"


async def test_add_rotate_and_remove_sources_in_the_browser(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    empty = await client.get(PAGE)
    assert empty.status_code == 200
    assert "No source yet" in empty.text
    assert 'href="/ui/workspace/webhook-sources"' in empty.text  # in the settings menu
    token = csrf_from(empty.text)

    refused = await client.post(
        PAGE, data={"_csrf_token": token, "name": "Payments", "kind": "stripe", "secret": "sk_1"}
    )
    assert refused.status_code == 422
    assert "Signing secret: a Stripe signing secret starts with whsec_" in refused.text
    assert 'value="Payments"' in refused.text
    assert "sk_1" not in refused.text

    added = await client.post(
        PAGE,
        data={
            "_csrf_token": token,
            "name": "Payments",
            "kind": "stripe",
            "secret": "whsec_" + "a" * 32,
        },
    )
    assert added.status_code == 200
    assert "whsec_" + "a" * 32 not in added.text  # pasted in: never shown
    assert 'id="new-secret"' not in added.text
    cal = await client.post(PAGE, data={"_csrf_token": token, "name": "Calendar", "kind": "calcom"})
    shown = re.search(r'<code id="new-secret">([^<]+)</code>', cal.text)
    assert shown is not None
    secret = shown.group(1)
    assert "/hooks/funnels/sources/src_" in cal.text
    again = await client.get(PAGE)
    assert secret not in again.text
    assert [m for m in re.findall(r'data-source="([^"]+)"', again.text)] == ["Payments", "Calendar"]

    ids = re.findall(r"/ui/workspace/webhook-sources/(\d+)/rotate", again.text)
    rotated = await client.post(
        f"{PAGE}/{ids[1]}/rotate", data={"_csrf_token": token, "secret": ""}
    )
    fresh = re.search(r'<code id="new-secret">([^<]+)</code>', rotated.text)
    assert fresh is not None
    assert fresh.group(1) != secret
    needs = await client.post(f"{PAGE}/{ids[0]}/rotate", data={"_csrf_token": token, "secret": ""})
    assert needs.status_code == 422
    assert "Signing secret:" in needs.text

    removed = await client.post(f"{PAGE}/{ids[1]}/delete", data={"_csrf_token": token})
    assert removed.status_code in (302, 303)
    final = await client.get(PAGE)
    assert re.findall(r'data-source="([^"]+)"', final.text) == ["Payments"]


async def test_a_member_reads_sources_but_cannot_change_them(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await sign_in(client, tenant.member_email, tenant.member_password)
    page = await client.get(PAGE)
    assert page.status_code == 200
    assert 'id="source-form"' not in page.text
    refused = await client.post(
        PAGE, data={"_csrf_token": csrf_from(page.text), "name": "X", "kind": "calcom"}
    )
    assert refused.status_code == 403
