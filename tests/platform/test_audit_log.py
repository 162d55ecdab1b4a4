"""The audit log (issue 31, item 1): every side-effecting action of a person or a key is recorded
with who, which principal, from where and what (before/after for settings, secrets never in
clear); the table is append-only on both databases; owners and admins of the organisation read
their own organisation's log on a page, filtered, and as CSV (PL-1 roles); entries go after
``AUDIT_RETENTION_DAYS``. Sign-in (PL-2), secrets (PL-3) and the sign-in throttle (PL-6) are
among the recorded families; the engines' families are in test_audit_engines.py."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from app.clock import ManualClock
from app.platform import audit
from app.platform.audit.append_only import unlocked
from app.platform.audit.models import AuditEntry
from app.runtime import Runtime
from app.scheduling.housekeeping import purge_old_audit_entries
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.audit_support import entries, key_headers, one, signed_in
from tests.platform.conftest import post_form, sign_in

# -- append-only -----------------------------------------------------------------------------


async def _add_entry(runtime: Runtime, tenant: Tenant) -> int:
    async with runtime.db.write() as uow:
        entry = await audit.record(
            uow.session,
            action="test.done",
            object_type="test",
            object_id=1,
            organisation_id=tenant.organisation_id,
            now=runtime.clock.now(),
            actor=audit.Actor("user", tenant.user_id),
        )
        await uow.session.flush()
        return entry.id


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_log SET action = 'forged' WHERE id = :id",
        "DELETE FROM audit_log WHERE id = :id",
    ],
)
async def test_the_database_refuses_to_change_or_remove_an_entry(
    runtime: Runtime, tenant: Tenant, statement: str
) -> None:
    entry_id = await _add_entry(runtime, tenant)
    with pytest.raises(DBAPIError, match="append-only"):
        async with runtime.db.write() as uow:
            await uow.session.execute(text(statement), {"id": entry_id})
    kept = await one(runtime, "test.done")
    assert kept.id == entry_id


async def test_postgres_refuses_truncate_too(runtime: Runtime, tenant: Tenant) -> None:
    if runtime.db.dialect != "postgresql":
        pytest.skip("SQLite has no TRUNCATE")
    await _add_entry(runtime, tenant)
    with pytest.raises(DBAPIError, match="append-only"):
        async with runtime.db.write() as uow:
            await uow.session.execute(text("TRUNCATE audit_log"))


async def test_an_unlocked_transaction_may_remove_entries_and_the_lock_returns(
    runtime: Runtime, tenant: Tenant
) -> None:
    entry_id = await _add_entry(runtime, tenant)
    second = await _add_entry(runtime, tenant)
    async with runtime.db.write() as uow:
        async with unlocked(uow.session):
            await uow.session.execute(
                text("DELETE FROM audit_log WHERE id = :id"), {"id": entry_id}
            )
        # Relocked in the same transaction: the next change is refused again.
        with pytest.raises(DBAPIError, match="append-only"):
            async with uow.session.begin_nested():
                await uow.session.execute(
                    text("DELETE FROM audit_log WHERE id = :id"), {"id": second}
                )
    assert [e.id for e in await entries(runtime)] == [second]


# -- platform families, through HTTP ---------------------------------------------------------


async def test_pl2_sign_in_and_sign_out_are_recorded_with_address_and_agent(
    runtime: Runtime, tenant: Tenant, new_client: Callable[[], Any]
) -> None:
    browser = await signed_in(new_client, tenant.email, tenant.password)
    entry = await one(runtime, "session.signed_in")
    assert (entry.actor_kind, entry.user_id, entry.organisation_id) == (
        "user",
        tenant.user_id,
        tenant.organisation_id,
    )
    assert entry.client_address == "127.0.0.1"
    assert entry.user_agent == "audit-test/1.0"
    assert (await post_form(browser, "/", "/logout")).status_code in (302, 303)
    out = await one(runtime, "session.signed_out")
    assert (out.actor_kind, out.user_id) == ("user", tenant.user_id)


async def test_pl6_a_burst_of_failed_sign_ins_is_recorded_once_when_the_throttle_trips(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    limit = runtime.settings.security.sign_in_max_failures
    for _ in range(limit):
        assert (await sign_in(client, tenant.email, "wrong password")).status_code == 401
    assert await entries(runtime, "session.sign_in_throttled") == []
    for _ in range(3):
        assert (await sign_in(client, tenant.email, "wrong password")).status_code == 429
    entry = await one(runtime, "session.sign_in_throttled")
    assert (entry.actor_kind, entry.object_id) == ("anonymous", str(tenant.user_id))
    assert entry.organisation_id == tenant.organisation_id
    # An address nobody has an account with leaves nothing in any organisation's log.
    for _ in range(limit + 1):
        await sign_in(client, "nobody@nowhere.test", "wrong password")
    assert len(await entries(runtime, "session.sign_in_throttled")) == 1


async def test_api_keys_created_and_revoked_are_recorded_with_the_calling_key(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    created = await client.post(
        "/api/v1/api-keys", json={"name": "ci", "scope": "read"}, headers=key_headers(tenant)
    )
    assert created.status_code == 201, created.text
    key = created.json()
    entry = await one(runtime, "api_key.created")
    assert entry.object_id == str(key["id"])
    assert entry.actor_kind == "api_key"
    assert entry.api_key_id is not None
    assert entry.after == {
        "name": "ci",
        "prefix": key["prefix"],
        "scope": "read",
        "expires_at": None,
    }
    assert key["key"] not in repr(entry.after)
    assert (entry.client_address, entry.user_agent) == ("127.0.0.1", "audit-test/1.0")
    r = await client.delete(f"/api/v1/api-keys/{key['id']}", headers=key_headers(tenant))
    assert r.status_code == 204
    revoked = await one(runtime, "api_key.revoked")
    assert revoked.workspace_id == tenant.workspace_id
    # Revoking again changes nothing and records nothing.
    await client.delete(f"/api/v1/api-keys/{key['id']}", headers=key_headers(tenant))
    assert len(await entries(runtime, "api_key.revoked")) == 1


async def test_pl3_secrets_set_rotated_and_deleted_are_recorded_never_their_value(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    value = "sk-live-very-secret-value-42"
    r = await client.put(
        "/api/v1/secrets/smtp_password", json={"value": value}, headers=key_headers(tenant)
    )
    assert r.status_code == 200, r.text
    rotated = await client.post("/api/v1/webhook-secret/rotate", headers=key_headers(tenant))
    new_secret = rotated.json()["webhook_secret"]
    assert (
        await client.delete("/api/v1/secrets/smtp_password", headers=key_headers(tenant))
    ).status_code == 204
    assert [
        (e.action, e.object_id) for e in await entries(runtime) if e.object_type == "secret"
    ] == [
        ("secret.set", "smtp_password"),
        ("secret.rotated", "webhook_secret"),
        ("secret.deleted", "smtp_password"),
    ]
    async with runtime.db.read() as session:
        dumped = " ".join(
            str(row) for row in (await session.execute(text("SELECT * FROM audit_log"))).all()
        )
    assert value not in dumped
    assert new_secret not in dumped


async def test_pl1_members_workspaces_and_invitations_are_recorded_with_before_and_after(
    runtime: Runtime, tenant: Tenant, new_client: Callable[[], Any]
) -> None:
    browser = await signed_in(new_client, tenant.email, tenant.password)
    page = "/ui/organisation"
    r = await post_form(browser, page, f"{page}/workspaces", name="Second")
    assert r.status_code in (200, 302, 303), r.text
    created = await one(runtime, "workspace.created")
    assert created.after == {"name": "Second", "timezone": "UTC"}
    ws_id = int(created.object_id)
    r = await post_form(browser, page, f"{page}/workspaces/{ws_id}/rename", name="Sales")
    assert r.status_code in (302, 303), r.text
    renamed = await one(runtime, "workspace.renamed")
    assert (renamed.before, renamed.after) == ({"name": "Second"}, {"name": "Sales"})

    async with runtime.db.read() as session:
        from app.platform.models import User

        member_id = await session.scalar(select(User.id).where(User.email == tenant.member_email))
    r = await post_form(browser, page, f"{page}/people/{member_id}/role", role="admin")
    assert r.status_code in (302, 303), r.text
    role = await one(runtime, "member.org_role_changed")
    assert role.before == {"org_role": "member", "email": tenant.member_email}
    assert role.after == {"org_role": "admin", "email": tenant.member_email}
    assert (role.actor_kind, role.user_id) == ("user", tenant.user_id)

    r = await post_form(
        browser,
        page,
        f"{page}/invitations",
        email="new.hire@acme.test",
        workspace_id=str(tenant.workspace_id),
        role="member",
    )
    assert r.status_code in (200, 302, 303), r.text
    invited = await one(runtime, "invitation.created")
    assert invited.after == {"email": "new.hire@acme.test", "role": "member"}
    r = await post_form(browser, page, f"{page}/invitations/{invited.object_id}/revoke")
    assert r.status_code in (200, 302, 303), r.text
    await one(runtime, "invitation.revoked")

    r = await post_form(browser, page, f"{page}/people/{member_id}/remove")
    assert r.status_code in (302, 303), r.text
    removed = await one(runtime, "member.removed")
    assert removed.before == {"email": tenant.member_email, "org_role": "admin"}


# -- reading: API, filters, CSV, page, tenancy, retention --------------------------------------


async def test_api_lists_the_workspace_entries_newest_first_with_filters_and_pages(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, clock: ManualClock
) -> None:
    h = key_headers(tenant)
    for name in ("a", "b", "c"):
        await client.put(f"/api/v1/secrets/{name}", json={"value": "x" * 8}, headers=h)
        clock.advance(hours=1)
    await client.post("/api/v1/api-keys", json={"name": "ci"}, headers=h)
    newest = (await client.get("/api/v1/audit?limit=1", headers=h)).json()
    assert [i["action"] for i in newest["items"]] == ["api_key.created"]
    page = (await client.get("/api/v1/audit?limit=2&action=secret.set", headers=h)).json()
    assert [i["object_id"] for i in page["items"]] == ["c", "b"]
    rest = (
        await client.get(
            f"/api/v1/audit?limit=2&action=secret.set&cursor={page['next_cursor']}", headers=h
        )
    ).json()
    assert [i["object_id"] for i in rest["items"]] == ["a"]
    assert rest["next_cursor"] is None
    only = (await client.get("/api/v1/audit?action=secret.*&object_type=secret", headers=h)).json()
    assert [i["object_id"] for i in only["items"]] == ["c", "b", "a"]
    start = (clock.now() - timedelta(hours=2)).isoformat()
    since = (
        await client.get("/api/v1/audit", params={"from": start, "action": "secret.set"}, headers=h)
    ).json()
    assert [i["object_id"] for i in since["items"]] == ["c", "b"]
    until = (
        await client.get("/api/v1/audit", params={"to": start, "object_type": "secret"}, headers=h)
    ).json()
    assert [i["object_id"] for i in until["items"]] == ["a"]
    by_key = (await client.get("/api/v1/audit", params={"actor": "api_key:999"}, headers=h)).json()
    assert by_key["items"] == []
    key_id = page["items"][0]["api_key_id"]
    assert key_id is not None
    by_key = (
        await client.get("/api/v1/audit", params={"actor": f"api_key:{key_id}"}, headers=h)
    ).json()
    assert len(by_key["items"]) == 4


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-01-01T10:00:00"}, "to"),
        ({"actor": "robot:1"}, "actor"),
        ({"actor": "user:99999999999999999999"}, "actor"),
        ({"from": "2026-02-01", "to": "2026-01-01"}, "to"),
    ],
)
async def test_bad_filters_are_422_naming_the_field(
    tenant: Tenant, client: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    r = await client.get("/api/v1/audit", params=params, headers=key_headers(tenant))
    assert r.status_code == 422, r.text
    assert r.json()["details"][0]["field"] == field


async def test_csv_export_bytes_and_the_export_is_recorded(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    h = {**auth(tenant), "User-Agent": "=HYPERLINK(1)"}
    await client.put("/api/v1/secrets/smtp", json={"value": "x" * 8}, headers=h)
    r = await client.get("/api/v1/audit.csv?action=secret.set", headers=h)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"] == 'attachment; filename="audit.csv"'
    lines = r.content.split(b"\r\n")
    assert lines[0] == (
        b"id,at,action,object_type,object_id,workspace_id,actor_kind,user_id,api_key_id,"
        b"client_address,user_agent,before,after"
    )
    rows = list(csv.reader(io.StringIO(r.text)))
    assert len(rows) == 2
    assert rows[1][2:5] == ["secret.set", "secret", "smtp"]
    assert rows[1][9:11] == ["127.0.0.1", "'=HYPERLINK(1)"]  # no formula for a spreadsheet
    exported = await one(runtime, "audit.exported")
    assert exported.after == {
        "action": "secret.set", "actor": None, "object_type": None, "from": None, "to": None
    }  # fmt: skip


async def test_pl1_the_page_is_for_owners_and_admins_of_their_own_organisation(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant, new_client: Callable[[], Any]
) -> None:
    """Tenancy: an owner sees their organisation's entries only, never another's; a member is
    refused (403) the page and the CSV."""
    owner = await signed_in(new_client, tenant.email, tenant.password)
    await signed_in(new_client, other_tenant.email, other_tenant.password)
    page = await owner.get("/ui/organisation/audit")
    assert page.status_code == 200
    async with runtime.db.read() as session:
        own = list(
            await session.scalars(
                select(AuditEntry.id).where(AuditEntry.organisation_id == tenant.organisation_id)
            )
        )
    assert sorted(int(i) for i in re.findall(r'data-audit-id="(\d+)"', page.text)) == own
    assert 'href="/ui/organisation/audit.csv"' in page.text
    filtered = await owner.get("/ui/organisation/audit", params={"action": "workspace.*"})
    assert 'data-audit-id="' not in filtered.text
    bad = await owner.get("/ui/organisation/audit", params={"from": "soon"})
    assert bad.status_code == 422
    assert "from" in bad.text
    exported = await owner.get("/ui/organisation/audit.csv")
    assert exported.status_code == 200
    assert len(list(csv.reader(io.StringIO(exported.text)))) == 1 + len(own)
    others = await entries(runtime)
    assert {e.organisation_id for e in others} == {
        tenant.organisation_id,
        other_tenant.organisation_id,
    }
    member = await signed_in(new_client, tenant.member_email, tenant.member_password)
    assert (await member.get("/ui/organisation/audit")).status_code == 403
    assert (await member.get("/ui/organisation/audit.csv")).status_code == 403


async def test_the_api_key_of_another_organisation_sees_none_of_these_entries(
    tenant: Tenant, other_tenant: Tenant, client: httpx.AsyncClient
) -> None:
    await client.put("/api/v1/secrets/mine", json={"value": "x" * 8}, headers=key_headers(tenant))
    theirs = (await client.get("/api/v1/audit", headers=key_headers(other_tenant))).json()
    assert {i["workspace_id"] for i in theirs["items"]} == {other_tenant.workspace_id}
    assert "mine" not in [i["object_id"] for i in theirs["items"]]
    mine = (
        await client.get("/api/v1/audit?object_type=secret", headers=key_headers(tenant))
    ).json()
    assert [i["object_id"] for i in mine["items"]] == ["mine"]


async def test_the_audit_routes_require_a_caller(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/v1/audit")).status_code == 401
    assert (await client.get("/api/v1/audit.csv")).status_code == 401
    assert (await client.get("/ui/organisation/audit")).status_code in (302, 303)


async def test_the_hourly_sweep_forgets_entries_past_the_retention(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    days = runtime.settings.security.audit_retention_days
    assert days == 365
    await _add_entry(runtime, tenant)
    clock.advance(days=days)
    kept = await _add_entry(runtime, tenant)
    clock.advance(hours=1)
    await purge_old_audit_entries(runtime.context(), clock.now())
    assert [e.id for e in await entries(runtime)] == [kept]


def test_the_retention_setting_is_checked() -> None:
    from app.settings_fields import SettingsError
    from app.settings_web import SecuritySettings

    with pytest.raises(SettingsError, match="AUDIT_RETENTION_DAYS"):
        SecuritySettings(audit_retention_days=0)
    assert (
        dataclasses.replace(SecuritySettings(), audit_retention_days=30).audit_retention_days == 30
    )
