"""PL-2 access: dashboard sign-in (argon2, session cookie, CSRF), sign-out, API keys, ingest tokens,
and admin-only actions."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select, text

from app.platform import service, sessions
from app.platform.models import ApiKey, User, UserSession
from app.platform.tokens import needs_rehash
from app.runtime import Runtime
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, post_form, sign_in


async def test_pl2_passwords_are_stored_as_argon2_hashes(runtime: Runtime, tenant: Tenant) -> None:
    async with runtime.db.read() as session:
        stored = await session.scalar(select(User.password_hash).where(User.id == tenant.user_id))
    assert stored is not None
    assert stored.startswith("$argon2id$")
    assert tenant.password not in stored


async def test_pl2_sign_in_sets_an_httponly_samesite_lax_session_cookie(
    new_client: Any, tenant: Tenant
) -> None:
    client = await new_client()
    r = await sign_in(client, tenant.email, tenant.password)
    assert r.status_code in (302, 303)
    assert r.headers["location"] == "/"
    cookie = next(c for c in r.headers.get_list("set-cookie") if c.startswith("swl_session="))
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert "httponly" in attributes
    assert "samesite=lax" in cookie.lower()
    home = await client.get("/")
    assert home.status_code == 200
    assert "Acme main" in home.text


async def test_pl2_wrong_password_is_refused_and_opens_no_session(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    client = await new_client()
    r = await sign_in(client, tenant.email, "not the password")
    assert r.status_code == 401
    assert "Wrong e-mail or password" in r.text
    r = await sign_in(client, "nobody@nowhere.test", tenant.password)
    assert r.status_code == 401
    async with runtime.db.read() as session:
        assert await session.scalar(select(UserSession.id)) is None
    assert (await client.get("/")).status_code in (302, 303)


async def test_pl2_pages_redirect_to_sign_in_and_come_back(new_client: Any, tenant: Tenant) -> None:
    client = await new_client()
    r = await client.get("/ui/workspace")
    assert r.status_code in (302, 303)
    assert r.headers["location"] == "/login?next=/ui/workspace"
    form = await client.get(r.headers["location"])
    r = await client.post(
        "/login",
        data={
            "email": tenant.email,
            "password": tenant.password,
            "next": "/ui/workspace",
            "_csrf_token": csrf_from(form.text),
        },
    )
    assert r.headers["location"] == "/ui/workspace"


async def test_pl2_sign_in_never_redirects_off_site(new_client: Any, tenant: Tenant) -> None:
    client = await new_client()
    form = await client.get("/login")
    r = await client.post(
        "/login",
        data={
            "email": tenant.email,
            "password": tenant.password,
            "next": "//evil.example/phish",
            "_csrf_token": csrf_from(form.text),
        },
    )
    assert r.headers["location"] == "/"


async def test_pl2_csrf_login_without_token_is_refused(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    client = await new_client()
    await client.get("/login")  # the CSRF cookie is set, but the form field is missing
    r = await client.post("/login", data={"email": tenant.email, "password": tenant.password})
    assert r.status_code == 403
    assert r.json()["code"] == "csrf_failed"
    assert "swl_session" not in r.cookies
    async with runtime.db.read() as session:
        assert await session.scalar(select(UserSession.id)) is None


async def test_pl2_csrf_token_from_another_browser_is_refused(
    new_client: Any, tenant: Tenant
) -> None:
    victim, attacker = await new_client(), await new_client()
    attacker_token = csrf_from((await attacker.get("/login")).text)
    await victim.get("/login")
    r = await victim.post(
        "/login",
        data={"email": tenant.email, "password": tenant.password, "_csrf_token": attacker_token},
    )
    assert r.status_code == 403


async def test_pl2_csrf_logout_without_token_is_refused(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    client = await new_client()
    await sign_in(client, tenant.email, tenant.password)
    r = await client.post("/logout")
    assert r.status_code == 403
    assert r.json()["code"] == "csrf_failed"
    # Still signed in: the forged sign-out did nothing.
    assert (await client.get("/")).status_code == 200
    async with runtime.db.read() as session:
        assert await session.scalar(select(UserSession.id)) is not None


async def test_pl2_sign_out_ends_the_session(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    client = await new_client()
    await sign_in(client, tenant.email, tenant.password)
    stolen_cookie = client.cookies.get("swl_session")
    r = await post_form(client, "/", "/logout")
    assert r.status_code in (302, 303)
    assert r.headers["location"] == "/login"
    assert (await client.get("/")).status_code in (302, 303)
    # The old cookie value no longer opens anything: the session row is gone.
    async with runtime.db.read() as session:
        assert await session.scalar(select(UserSession.id)) is None
    replay = await new_client()
    replay.cookies.set("swl_session", stolen_cookie or "")
    assert (await replay.get("/")).status_code in (302, 303)


async def test_pl2_expired_session_is_not_accepted(
    new_client: Any, runtime: Runtime, tenant: Tenant, clock: Any
) -> None:
    client = await new_client()
    await sign_in(client, tenant.email, tenant.password)
    clock.advance(sessions.SESSION_LIFETIME.total_seconds())
    assert (await client.get("/")).status_code in (302, 303)


async def test_pl2_api_key_is_shown_once_and_stored_hashed(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    r = await client.post("/api/v1/api-keys", json={"name": "ci"}, headers=auth(tenant))
    assert r.status_code == 201
    created = r.json()
    raw = created["key"]
    assert raw.startswith("swl_")
    async with runtime.db.read() as session:
        row = await session.get(ApiKey, created["id"])
        assert row is not None
        assert row.key_hash != raw
        assert len(row.key_hash) == 64
        dump = " ".join(
            str(v)
            for r_ in (await session.execute(text("SELECT * FROM api_keys"))).all()
            for v in r_
        )
    assert raw not in dump
    # The new key works...
    assert (
        await client.get("/api/v1/workspace", headers={"Authorization": f"Bearer {raw}"})
    ).status_code == 200
    # ...and is never listed or shown again.
    listed = await client.get("/api/v1/api-keys", headers=auth(tenant))
    assert raw not in listed.text
    assert all("key" not in item for item in listed.json()["items"])
    one = await client.get(f"/api/v1/api-keys/{created['id']}", headers=auth(tenant))
    assert one.status_code == 200
    assert "key" not in one.json()


async def test_pl2_revoked_api_key_answers_401(client: httpx.AsyncClient, tenant: Tenant) -> None:
    created = (
        await client.post("/api/v1/api-keys", json={"name": "temp"}, headers=auth(tenant))
    ).json()
    temp = {"Authorization": f"Bearer {created['key']}"}
    assert (await client.get("/api/v1/workspace", headers=temp)).status_code == 200
    r = await client.delete(f"/api/v1/api-keys/{created['id']}", headers=auth(tenant))
    assert r.status_code == 204
    r = await client.get("/api/v1/workspace", headers=temp)
    assert r.status_code == 401
    assert r.json()["code"] == "unauthorized"
    listed = (await client.get("/api/v1/api-keys", headers=auth(tenant))).json()["items"]
    assert next(k for k in listed if k["id"] == created["id"])["revoked_at"] is not None


async def test_pl2_api_requires_a_key(client: httpx.AsyncClient) -> None:
    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer swl_unknown"}):
        r = await client.get("/api/v1/workspace", headers=headers)
        assert r.status_code == 401
        assert r.json()["code"] == "unauthorized"


async def test_pl2_ingest_token_rotation_retires_the_old_token(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    async with runtime.db.read() as session:
        ws = await service.workspace_for_ingest_token(session, tenant.ingest_token)
    assert ws is not None
    assert ws.id == tenant.workspace_id
    r = await client.post("/api/v1/ingest-token/rotate", headers=auth(tenant))
    assert r.status_code == 201
    new = r.json()["ingest_token"]
    assert new.startswith("swi_")
    assert new != tenant.ingest_token
    async with runtime.db.read() as session:
        assert await service.workspace_for_ingest_token(session, tenant.ingest_token) is None
        ws = await service.workspace_for_ingest_token(session, new)
    assert ws is not None
    assert ws.id == tenant.workspace_id


async def test_pl2_member_is_refused_admin_actions_with_403(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    client = await new_client()
    await sign_in(client, tenant.member_email, tenant.member_password)
    page = await client.get("/ui/workspace")
    assert page.status_code == 200
    assert 'id="create-key"' not in page.text  # members are not offered the form...
    token = csrf_from(page.text)
    r = await client.post("/ui/workspace/api-keys", data={"name": "sneaky", "_csrf_token": token})
    assert r.status_code == 403  # ...and posting it anyway is refused
    assert r.json()["code"] == "forbidden"
    r = await client.post("/ui/workspace/ingest-token", data={"_csrf_token": token})
    assert r.status_code == 403
    async with runtime.db.read() as session:
        names = [
            k.name for k in await service.list_api_keys(session, tenant.workspace_id, limit=10)
        ]
    assert names == ["tests"]


async def test_pl2_dashboard_api_key_created_shown_once_then_revoked(
    new_client: Any, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)
    r = await post_form(browser, "/ui/workspace", "/ui/workspace/api-keys", name="zapier")
    assert r.status_code == 200
    raw = r.text.split('<code id="new-key">')[1].split("</code>")[0]
    assert raw.startswith("swl_")
    assert (
        await client.get("/api/v1/workspace", headers={"Authorization": f"Bearer {raw}"})
    ).status_code == 200
    page = await browser.get("/ui/workspace")
    assert raw not in page.text
    key_id = next(
        k["id"]
        for k in (await client.get("/api/v1/api-keys", headers=auth(tenant))).json()["items"]
        if k["name"] == "zapier"
    )
    r = await post_form(browser, "/ui/workspace", f"/ui/workspace/api-keys/{key_id}/revoke")
    assert r.status_code in (302, 303)
    assert (
        await client.get("/api/v1/workspace", headers={"Authorization": f"Bearer {raw}"})
    ).status_code == 401


async def test_pl2_dashboard_api_key_name_is_required(new_client: Any, tenant: Tenant) -> None:
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)
    r = await post_form(browser, "/ui/workspace", "/ui/workspace/api-keys", name="   ")
    assert r.status_code == 422
    assert "Give the key a name" in r.text


async def test_pl2_member_role_comes_from_the_membership(
    client: httpx.AsyncClient, new_client: Any, tenant: Tenant
) -> None:
    browser = await new_client()
    await sign_in(browser, tenant.member_email, tenant.member_password)
    assert "you are member" in (await browser.get("/ui/workspace")).text
    # API keys always act as admin of their workspace.
    assert (await client.get("/api/v1/workspace", headers=auth(tenant))).json()["role"] == "admin"


async def test_pl2_weaker_password_hash_is_upgraded_at_sign_in(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    from argon2 import PasswordHasher

    weak = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(tenant.password)
    async with runtime.db.write() as uow:
        user = await uow.session.get(User, tenant.user_id)
        assert user is not None
        user.password_hash = weak
    client = await new_client()
    assert (await sign_in(client, tenant.email, tenant.password)).status_code in (302, 303)
    async with runtime.db.read() as session:
        stored = await session.scalar(select(User.password_hash).where(User.id == tenant.user_id))
    assert stored != weak
    assert stored is not None
    assert not needs_rehash(stored)


async def test_pl2_htmx_refresh_after_the_session_ended_navigates_to_sign_in(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/ui/partials/status", headers={"HX-Request": "true"})
    assert r.status_code == 401
    assert r.headers["hx-redirect"] == "/login"
    plain = await client.get("/ui/partials/status")
    assert plain.status_code in (302, 303)
