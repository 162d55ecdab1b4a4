"""Helpers for the platform tests: extra HTTP clients on one app, and signing in through the real
form (CSRF token included), as a browser does."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.platform import service
from app.runtime import Runtime
from app.settings import Settings
from tests.harness.app_client import asgi_transport

_CSRF_FIELD = re.compile(r'name="_csrf_token" value="([^"]+)"')


def csrf_from(html: str) -> str:
    match = _CSRF_FIELD.search(html)
    assert match, "the page has no CSRF field"
    return match.group(1)


async def sign_in(
    client: httpx.AsyncClient, email: str, password: str, *, forwarded_for: str | None = None
) -> httpx.Response:
    """Submit the sign-in form like a browser: load it, then post it with its CSRF token."""
    form = await client.get("/login")
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else None
    return await client.post(
        "/login",
        data={"email": email, "password": password, "_csrf_token": csrf_from(form.text)},
        headers=headers,
    )


async def post_form(
    client: httpx.AsyncClient, page: str, action: str, **fields: Any
) -> httpx.Response:
    """Post a dashboard form found on ``page`` with that page's CSRF token."""
    html = (await client.get(page)).text
    return await client.post(action, data={**fields, "_csrf_token": csrf_from(html)})


@pytest.fixture
async def new_client(settings: Settings, runtime: Runtime) -> AsyncIterator[Callable[[], Any]]:
    """A factory of independent clients (own cookie jar) on one app, like several browsers."""
    from app.web.app import create_app

    app = create_app(settings, runtime, background=False)
    async with AsyncExitStack() as stack:

        async def make() -> httpx.AsyncClient:
            return await stack.enter_async_context(
                httpx.AsyncClient(transport=asgi_transport(app), base_url="http://testserver")
            )

        yield make


@dataclass(frozen=True)
class ApiTenant:
    """A workspace reached only through its API key (no people: no password hashing to wait for)."""

    organisation_id: int
    workspace_id: int
    api_key: str
    ingest_token: str


async def create_api_tenant(runtime: Runtime, name: str) -> ApiTenant:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name=name, now=now)
        created = await service.create_workspace(
            uow.session, runtime.secrets, organisation_id=org.id, name=f"{name} main", now=now
        )
        _, key = await service.create_api_key(
            uow.session, workspace_id=created.workspace.id, name="tests", now=now
        )
    return ApiTenant(org.id, created.workspace.id, key, created.ingest_token)


@pytest.fixture
async def api_tenant(runtime: Runtime) -> ApiTenant:
    return await create_api_tenant(runtime, "Initech")
