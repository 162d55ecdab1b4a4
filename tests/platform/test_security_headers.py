"""Security headers on dashboard pages, API answers and middleware rejections; the access log
records the status actually sent (a CSRF rejection is a 403, not a 500)."""

from __future__ import annotations

import dataclasses
import logging

import httpx
import pytest

from app.runtime import Runtime
from app.settings import Settings
from tests.conftest import auth
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport
from tests.platform.conftest import ApiTenant, sign_in


def assert_protected(response: httpx.Response) -> None:
    csp = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp.split("script-src", 1)[1].split(";", 1)[0]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "same-origin"


async def test_a_dashboard_page_carries_the_headers(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    assert (await sign_in(client, tenant.email, tenant.password)).status_code in (302, 303)
    page = await client.get("/")
    assert page.status_code == 200
    assert_protected(page)
    assert "Strict-Transport-Security" not in page.headers  # not served over HTTPS here
    assert_protected(await client.get("/login"))


async def test_an_api_answer_and_an_error_carry_the_headers(
    client: httpx.AsyncClient, api_tenant: ApiTenant
) -> None:
    ok = await client.get("/api/v1/workspace", headers=auth(api_tenant))
    assert_protected(ok)
    refused = await client.get("/api/v1/workspace")
    assert refused.status_code == 401
    assert_protected(refused)


async def test_hsts_when_secure_cookies(settings: Settings, runtime: Runtime) -> None:
    from app.web.app import create_app

    secure = dataclasses.replace(
        settings, web=dataclasses.replace(settings.web, secure_cookies=True)
    )
    app = create_app(secure, runtime, background=False)
    async with httpx.AsyncClient(transport=asgi_transport(app), base_url="https://testserver") as c:
        response = await c.get("/login")
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")


async def test_a_csrf_rejection_is_logged_as_the_403_it_is(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="app.access"):
        response = await client.post("/login", data={"email": "a@x.test", "password": "x"})
    assert response.status_code == 403
    assert_protected(response)
    [line] = [
        r
        for r in caplog.records
        if r.name == "app.access" and r.getMessage().startswith("POST /login")
    ]
    assert line.getMessage() == "POST /login 403"
    assert line.levelno == logging.INFO
