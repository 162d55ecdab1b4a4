"""What the audit-log tests share: the calling key's headers (with a recognisable user agent),
the entries recorded, and a browser signed in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import select

from app.platform.audit.models import AuditEntry
from app.runtime import Runtime
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.conftest import sign_in

UA = {"User-Agent": "audit-test/1.0"}


def key_headers(tenant: Tenant) -> dict[str, str]:
    return {**auth(tenant), **UA}


async def entries(runtime: Runtime, action: str | None = None) -> list[AuditEntry]:
    """The entries recorded, but for those of the tenants' making (the factory's own key)."""
    async with runtime.db.read() as session:
        stmt = select(AuditEntry).where(AuditEntry.actor_kind != "system").order_by(AuditEntry.id)
        if action is not None:
            stmt = stmt.where(AuditEntry.action == action)
        return list(await session.scalars(stmt))


async def one(runtime: Runtime, action: str) -> AuditEntry:
    found = await entries(runtime, action)
    assert len(found) == 1, (action, [(e.action, e.object_id) for e in await entries(runtime)])
    return found[0]


async def signed_in(new_client: Callable[[], Any], email: str, password: str) -> httpx.AsyncClient:
    browser: httpx.AsyncClient = await new_client()
    browser.headers.update(UA)
    r = await sign_in(browser, email, password)
    assert r.status_code in (302, 303), r.text
    return browser
