"""PL-1 tenancy: organisations → workspaces → members; every platform endpoint is scoped by the
caller's workspace and answers 404 for another workspace's ids."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.errors import Conflict, ValidationFailed
from app.platform import members, service
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


async def test_pl1_member_changes_are_refused_to_workspace_keys_alike_for_any_email(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """People are organisation-level: a workspace API key is refused (403), and the answer does
    not tell an e-mail of another organisation from an unknown one."""
    member = await member_id(runtime, tenant, tenant.member_email)
    answers = []
    for email in (other_tenant.email, "nobody@nowhere.test"):
        r = await client.post(
            "/api/v1/members", json={"email": email, "role": "member"}, headers=auth(tenant)
        )
        answers.append((r.status_code, r.json()["code"], r.json()["message"]))
    assert answers[0] == answers[1]
    assert answers[0][0] == 403
    r = await client.patch(
        f"/api/v1/members/{member}", json={"role": "admin"}, headers=auth(tenant)
    )
    assert r.status_code == 403
    assert (
        await client.delete(f"/api/v1/members/{member}", headers=auth(tenant))
    ).status_code == 403
    async with runtime.db.read() as session:
        roles = sorted(r for _, r in await service.workspace_members(session, tenant.workspace_id))
    assert roles == ["admin", "member"]


async def test_pl1_a_person_of_another_organisation_cannot_be_added(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    with pytest.raises(Conflict) as refused:
        async with runtime.db.write() as uow:
            await members.add_member(
                uow.session, workspace_id=tenant.workspace_id, email=other_tenant.email,
                role="member", now=runtime.clock.now(),
            )  # fmt: skip
    assert refused.value.code == "email_taken"


async def test_pl1_members_are_added_promoted_and_removed(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    async with runtime.db.write() as uow:
        user, role = await members.add_member(
            uow.session, workspace_id=tenant.workspace_id, email="New.Person@Acme.test",
            role="member", password="a long password", name="New", now=runtime.clock.now(),
        )  # fmt: skip
    assert (user.email, user.name, role) == ("new.person@acme.test", "New", "member")
    browser = await new_client()
    assert (await sign_in(browser, "new.person@acme.test", "a long password")).status_code in (
        302,
        303,
    )
    async with runtime.db.write() as uow:
        await members.set_role(
            uow.session,
            workspace_id=tenant.workspace_id,
            user_id=user.id,
            role="admin",
            now=runtime.clock.now(),
        )
    assert "you are admin" in (await browser.get("/ui/workspace")).text
    async with runtime.db.write() as uow:
        await members.remove_member(
            uow.session, workspace_id=tenant.workspace_id, user_id=user.id, now=runtime.clock.now()
        )
    # Removing the membership ends the person's session in that workspace at once.
    assert (await browser.get("/")).status_code in (302, 303)


async def test_pl1_new_account_needs_a_password(runtime: Runtime, tenant: Tenant) -> None:
    with pytest.raises(ValidationFailed) as refused:
        async with runtime.db.write() as uow:
            await members.add_member(
                uow.session, workspace_id=tenant.workspace_id, email="x@acme.test",
                role="member", now=runtime.clock.now(),
            )  # fmt: skip
    assert refused.value.details[0]["field"] == "password"


async def test_pl1_the_last_admin_cannot_leave_or_be_demoted(
    runtime: Runtime, tenant: Tenant
) -> None:
    for change in (
        lambda s: members.set_role(
            s,
            workspace_id=tenant.workspace_id,
            user_id=tenant.user_id,
            role="member",
            now=runtime.clock.now(),
        ),
        lambda s: members.remove_member(
            s, workspace_id=tenant.workspace_id, user_id=tenant.user_id, now=runtime.clock.now()
        ),
    ):
        with pytest.raises(Conflict) as refused:
            async with runtime.db.write() as uow:
                await change(uow.session)
        assert refused.value.code == "last_admin"
    async with runtime.db.read() as session:
        roles = {
            u.email: r for u, r in await service.workspace_members(session, tenant.workspace_id)
        }
    assert roles[tenant.email] == "admin"


async def test_pl1_two_admins_demoting_each_other_at_once_leave_one_admin(
    runtime: Runtime, tenant: Tenant
) -> None:
    import asyncio

    member = await member_id(runtime, tenant, tenant.member_email)
    async with runtime.db.write() as uow:
        await members.set_role(
            uow.session,
            workspace_id=tenant.workspace_id,
            user_id=member,
            role="admin",
            now=runtime.clock.now(),
        )

    async def demote(user_id: int) -> str:
        try:
            async with runtime.db.write() as uow:
                await members.set_role(
                    uow.session,
                    workspace_id=tenant.workspace_id,
                    user_id=user_id,
                    role="member",
                    now=runtime.clock.now(),
                )
        except Conflict as exc:
            return exc.code
        return "ok"

    results = await asyncio.gather(demote(tenant.user_id), demote(member))
    assert sorted(results) == ["last_admin", "ok"]
    async with runtime.db.read() as session:
        roles = [r for _, r in await service.workspace_members(session, tenant.workspace_id)]
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
