"""PL-1 tenancy: organisations → workspaces → members; every platform endpoint is scoped by the
caller's workspace and answers 404 for another workspace's ids."""

from __future__ import annotations

from typing import Any

import httpx

from app.platform import service
from app.runtime import Runtime
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.conftest import post_form, sign_in


async def other_key_id(client: httpx.AsyncClient, other: Tenant) -> int:
    items = (await client.get("/api/v1/api-keys", headers=auth(other))).json()["items"]
    return int(items[0]["id"])


async def member_id(runtime: Runtime, tenant: Tenant, email: str) -> int:
    async with runtime.db.read() as session:
        rows = await service.workspace_members(session, tenant.workspace_id)
    return next(u.id for u, _ in rows if u.email == email)


FOREIGN_ID_REQUESTS = [
    ("GET", "/api/v1/api-keys/{key}", None),
    ("DELETE", "/api/v1/api-keys/{key}", None),
    ("PATCH", "/api/v1/members/{member}", {"role": "admin"}),
    ("DELETE", "/api/v1/members/{member}", None),
    ("DELETE", "/api/v1/secrets/{secret}", None),
]


async def test_pl1_another_workspaces_ids_answer_404(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """Every platform endpoint taking an id, called with the other workspace's ids."""
    put = await client.put(
        "/api/v1/secrets/smtp", json={"value": "globex-pw"}, headers=auth(other_tenant)
    )
    assert put.status_code == 200
    ids = {
        "key": await other_key_id(client, other_tenant),
        "member": await member_id(runtime, other_tenant, other_tenant.member_email),
        "secret": "smtp",
    }
    for method, path, body in FOREIGN_ID_REQUESTS:
        r = await client.request(method, path.format(**ids), json=body, headers=auth(tenant))
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["code"] == "not_found"
    # Nothing changed on the other side.
    assert (await client.get("/api/v1/workspace", headers=auth(other_tenant))).status_code == 200
    async with runtime.db.read() as session:
        assert await service.secret_names(session, other_tenant.workspace_id) == ["smtp"]
        members = await service.workspace_members(session, other_tenant.workspace_id)
    assert sorted(r for _, r in members) == ["admin", "member"]


async def test_pl1_revoking_another_workspaces_key_does_not_revoke_it(
    client: httpx.AsyncClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    key_id = await other_key_id(client, other_tenant)
    assert (
        await client.delete(f"/api/v1/api-keys/{key_id}", headers=auth(tenant))
    ).status_code == 404
    assert (await client.get("/api/v1/workspace", headers=auth(other_tenant))).status_code == 200


async def test_pl1_lists_show_only_the_callers_workspace(
    client: httpx.AsyncClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    await client.put("/api/v1/secrets/acme_token", json={"value": "a"}, headers=auth(tenant))
    await client.put(
        "/api/v1/secrets/globex_token", json={"value": "g"}, headers=auth(other_tenant)
    )
    ws = (await client.get("/api/v1/workspace", headers=auth(tenant))).json()
    assert ws["id"] == tenant.workspace_id
    assert ws["organisation_id"] == tenant.organisation_id
    emails = [
        m["email"]
        for m in (await client.get("/api/v1/members", headers=auth(tenant))).json()["items"]
    ]
    assert sorted(emails) == sorted([tenant.email, tenant.member_email])
    keys = (await client.get("/api/v1/api-keys", headers=auth(tenant))).json()["items"]
    assert len(keys) == 1
    assert (await client.get("/api/v1/secrets", headers=auth(tenant))).json() == {
        "names": ["acme_token"]
    }


async def test_pl1_a_person_of_another_organisation_cannot_be_added(
    client: httpx.AsyncClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    r = await client.post(
        "/api/v1/members",
        json={"email": other_tenant.email, "role": "member"},
        headers=auth(tenant),
    )
    assert r.status_code == 409
    assert r.json()["code"] == "email_taken"


async def test_pl1_members_are_added_promoted_and_removed(
    client: httpx.AsyncClient, new_client: Any, tenant: Tenant
) -> None:
    r = await client.post(
        "/api/v1/members",
        json={
            "email": "New.Person@Acme.test",
            "role": "member",
            "password": "a long password",
            "name": "New",
        },
        headers=auth(tenant),
    )
    assert r.status_code == 201
    added = r.json()
    assert added == {
        "user_id": added["user_id"],
        "email": "new.person@acme.test",
        "name": "New",
        "role": "member",
    }
    browser = await new_client()
    assert (await sign_in(browser, "new.person@acme.test", "a long password")).status_code in (
        302,
        303,
    )
    r = await client.patch(
        f"/api/v1/members/{added['user_id']}", json={"role": "admin"}, headers=auth(tenant)
    )
    assert r.json()["role"] == "admin"
    assert "you are admin" in (await browser.get("/ui/workspace")).text
    assert (
        await client.delete(f"/api/v1/members/{added['user_id']}", headers=auth(tenant))
    ).status_code == 204
    # Removing the membership ends the person's session in that workspace at once.
    assert (await browser.get("/")).status_code in (302, 303)


async def test_pl1_new_account_needs_a_password(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.post(
        "/api/v1/members", json={"email": "x@acme.test", "role": "member"}, headers=auth(tenant)
    )
    assert r.status_code == 422
    assert r.json()["details"][0]["field"] == "password"


async def test_pl1_the_last_admin_cannot_leave_or_be_demoted(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    r = await client.patch(
        f"/api/v1/members/{tenant.user_id}", json={"role": "member"}, headers=auth(tenant)
    )
    assert r.status_code == 409
    assert r.json()["code"] == "last_admin"
    r = await client.delete(f"/api/v1/members/{tenant.user_id}", headers=auth(tenant))
    assert r.status_code == 409
    roles = {
        m["email"]: m["role"]
        for m in (await client.get("/api/v1/members", headers=auth(tenant))).json()["items"]
    }
    assert roles[tenant.email] == "admin"


async def test_pl1_two_admins_demoting_each_other_at_once_leave_one_admin(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    import asyncio

    member = await member_id(runtime, tenant, tenant.member_email)
    await client.patch(f"/api/v1/members/{member}", json={"role": "admin"}, headers=auth(tenant))
    results = await asyncio.gather(
        client.patch(
            f"/api/v1/members/{tenant.user_id}", json={"role": "member"}, headers=auth(tenant)
        ),
        client.patch(f"/api/v1/members/{member}", json={"role": "member"}, headers=auth(tenant)),
    )
    assert sorted(r.status_code for r in results) == [200, 409]
    roles = [
        m["role"]
        for m in (await client.get("/api/v1/members", headers=auth(tenant))).json()["items"]
    ]
    assert roles.count("admin") == 1


async def test_pl1_workspace_switcher_stores_the_choice_in_the_session(
    new_client: Any, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        second = await service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=tenant.organisation_id,
            name="Acme second",
            now=now,
        )
        await service.add_member(
            uow.session, user_id=tenant.user_id, workspace_id=second.workspace.id, role="member"
        )
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)
    assert "<h1>Acme main</h1>" in (await browser.get("/")).text
    page = await browser.get("/ui/workspace")
    assert 'id="switch-workspace"' in page.text
    r = await post_form(
        browser, "/ui/workspace", "/ui/workspace/switch", workspace_id=str(second.workspace.id)
    )
    assert r.status_code in (302, 303)
    assert "<h1>Acme second</h1>" in (await browser.get("/")).text
    assert "you are member" in (await browser.get("/ui/workspace")).text
    # A workspace the person does not belong to cannot be chosen.
    r = await post_form(
        browser,
        "/ui/workspace",
        "/ui/workspace/switch",
        workspace_id=str(other_tenant.workspace_id),
    )
    assert r.status_code == 404
    assert "<h1>Acme second</h1>" in (await browser.get("/")).text
