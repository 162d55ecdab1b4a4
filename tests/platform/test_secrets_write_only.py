"""PL-3, and issue 31's "secrets set/read" in the audit log: a stored secret is write-only. It is
shown once, in the answer that generated it, and no route reads a stored value back to a person
or a key, so there is no secret read to record (setting, rotating and removing one are recorded:
tests/platform/test_audit_log.py). This test stores known values through every way a secret goes
in, then fetches every GET operation of the API and every dashboard page, and finds none of them.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import httpx
from litestar.routes import HTTPRoute

from app.settings import Settings
from app.web.app import create_app
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.conftest import sign_in

NewClient = Callable[[], Awaitable[httpx.AsyncClient]]

WORKSPACE_SECRET = "ws-secret-value-7f3a9c1e"
PROVIDER_SECRET = "provider-key-value-b2d4e6f8"
SOURCE_SECRET = "calcom-signing-value-91ac3e55"
VALUES = (WORKSPACE_SECRET, PROVIDER_SECRET, SOURCE_SECRET)
_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


def _leaks(body: str) -> list[str]:
    return [value for value in VALUES if value in body]


async def test_pl3_no_api_operation_or_page_returns_a_stored_secret(
    settings: Settings, client: httpx.AsyncClient, tenant: Tenant, new_client: NewClient
) -> None:
    h = auth(tenant)
    put = await client.put("/api/v1/secrets/custom", json={"value": WORKSPACE_SECRET}, headers=h)
    assert put.status_code == 200, put.text
    body = {"shape": "json", "base_url": "https://sms.example", "secret": PROVIDER_SECRET}
    provider = await client.put("/api/v1/funnels/providers/sms", json=body, headers=h)
    assert provider.status_code == 200, provider.text
    source = await client.post(
        "/api/v1/funnels/sources",
        json={"name": "Bookings", "provider": "calcom", "secret": SOURCE_SECRET},
        headers=h,
    )
    assert source.status_code == 201, source.text
    # Each write answered without the value it was given.
    assert [_leaks(r.text) for r in (put, provider, source)] == [[], [], []]

    known = {"name": "custom", "kind": "sms", "source_id": str(source.json()["id"])}
    document = (await client.get("/schema/openapi.json")).json()
    fetched, leaks = 0, {}
    for path, item in document["paths"].items():
        if "get" not in item:
            continue
        url = _PARAM.sub(lambda m: known.get(m.group(1), "1"), path)
        answer = await client.get(url, headers=h)
        assert answer.status_code < 500, (url, answer.text)
        fetched += 1
        if found := _leaks(answer.text):
            leaks[url] = found
    assert fetched > 50  # the crawl really went over the API

    browser = await new_client()
    assert (await sign_in(browser, tenant.email, tenant.password)).status_code in (302, 303)
    app = create_app(settings, background=False)
    pages = sorted(
        {
            route.path
            for route in app.routes
            if isinstance(route, HTTPRoute)
            and route.path.startswith("/ui/")
            and "{" not in route.path
            and any("GET" in handler.http_methods for handler in route.route_handlers)
        }
    )
    for page in ["/", *pages]:
        answer = await browser.get(page)
        assert answer.status_code < 500, (page, answer.text)
        if found := _leaks(answer.text):
            leaks[page] = found
    assert len(pages) > 20
    assert leaks == {}
