"""PL-9: a response with status 204 or 304 has no body — read as raw bytes from a real server.

A body after a 204 is not harmless: the client takes the response as ending at its headers, so
the stray bytes become the start of the next response on the same kept-alive connection
(``nullHTTP/1.1 202``). Each route that answers 204, found in the application's route table, is
called on a real uvicorn server (httptools, as ``serve`` runs it), then a second request goes on
the same connection; the bytes between the first response's headers and the second status line
must be none. A route added with a 204 and no way here to make it answer one fails the test until
it is added to ``PREPARE``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
from litestar import Litestar, asgi
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from app.engines.ranktracking.local.models import MAPS, GeoGrid
from app.engines.ranktracking.local.scan_states import DONE
from app.engines.ranktracking.reservation_states import RES_SETTLED
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.settings import Settings
from app.web.access import public, route_handlers
from app.web.app import create_app
from app.web.empty_status import EMPTY_STATUSES, no_body_on_empty_statuses
from tests.conftest import auth
from tests.engines.adrules.factories import rule_body
from tests.engines.funnels.factories import contact
from tests.engines.ranktracking.factories import fund, make_schedule
from tests.factories import Tenant

Request = tuple[str, str, dict[str, str], bytes]
"""method, path, headers, body"""
Prepare = Callable[[httpx.AsyncClient, Runtime, Tenant], Awaitable[Request]]


def _json(data: Any) -> bytes:
    return msgspec.json.encode(data)


async def _api_key(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    made = await http.post("/api/v1/api-keys", json={"name": "temp"}, headers=auth(tenant))
    assert made.status_code == 201, made.text
    return "DELETE", f"/api/v1/api-keys/{made.json()['id']}", auth(tenant), b""


async def _secret(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    put = await http.put("/api/v1/secrets/meta_token", json={"value": "x"}, headers=auth(tenant))
    assert put.status_code == 200, put.text
    return "DELETE", "/api/v1/secrets/meta_token", auth(tenant), b""


async def _rule_task(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    base = rule_body(status="draft")
    made = await http.post(
        "/api/v1/adrules/rules", json={**base, "tasks": base["tasks"] * 2}, headers=auth(tenant)
    )
    assert made.status_code == 201, made.text
    rule = made.json()
    path = f"/api/v1/adrules/rules/{rule['id']}/tasks/{rule['tasks'][1]['id']}"
    return "DELETE", path, auth(tenant), b""


async def _contact(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    ann = await contact(runtime, tenant.workspace_id, "ann@example.com")
    return "DELETE", f"/api/v1/funnels/contacts/{ann}", auth(tenant), b""


async def _alert_rule(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, keywords=["shoes"], devices=["desktop"])
    base = f"/api/v1/ranktracking/schedules/{schedule.id}/alerts"
    body = {"name": "Top 3", "kind": "enters_top", "threshold": 3, "recipients": ["a@x.test"]}
    made = await http.post(base, json=body, headers=auth(tenant))
    assert made.status_code == 201, made.text
    return "DELETE", f"{base}/{made.json()['id']}", auth(tenant), b""


async def _report_link(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, keywords=["shoes"], devices=["desktop"])
    base = f"/api/v1/ranktracking/schedules/{schedule.id}/share-links"
    made = await http.post(base, json={"days": 7}, headers=auth(tenant))
    assert made.status_code == 201, made.text
    return "DELETE", f"{base}/{made.json()['id']}", auth(tenant), b""


async def _geogrid(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    """A finished scan (one still running cannot be deleted)."""
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        scan = GeoGrid(
            workspace_id=tenant.workspace_id,
            organisation_id=tenant.organisation_id,
            keyword="bakery",
            engine=MAPS,
            language_code="en",
            latitude=45.76,
            longitude=4.83,
            size=3,
            spacing_m=500,
            zoom=15,
            depth=20,
            queue="standard",
            status=DONE,
            reservation_state=RES_SETTLED,
            created_at=now,
            updated_at=now,
        )
        uow.session.add(scan)
        await uow.session.flush()
        scan_id = scan.id
    return "DELETE", f"/api/v1/ranktracking/geogrids/{scan_id}", auth(tenant), b""


async def _provider(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    body = {"shape": "json", "base_url": "https://sms.example", "options": {}, "secret": "k"}
    put = await http.put("/api/v1/funnels/providers/sms", json=body, headers=auth(tenant))
    assert put.status_code == 200, put.text
    return "DELETE", "/api/v1/funnels/providers/sms", auth(tenant), b""


async def _source(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    body = {"name": "Own", "provider": "calcom"}
    made = await http.post("/api/v1/funnels/sources", json=body, headers=auth(tenant))
    assert made.status_code == 201, made.text
    return "DELETE", f"/api/v1/funnels/sources/{made.json()['id']}", auth(tenant), b""


async def _saved_segment(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    body = {"name": "Temp", "predicate": {"kind": "has_tag", "tag": "vip"}}
    made = await http.post("/api/v1/funnels/saved-segments", json=body, headers=auth(tenant))
    assert made.status_code == 201, made.text
    return "DELETE", f"/api/v1/funnels/saved-segments/{made.json()['id']}", auth(tenant), b""


async def _annotation(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, keywords=["shoes"], devices=["desktop"])
    base = f"/api/v1/ranktracking/schedules/{schedule.id}/annotations"
    body = {"at": "2026-01-01T00:00:00Z", "text": "New titles"}
    made = await http.post(base, json=body, headers=auth(tenant))
    assert made.status_code == 201, made.text
    return "DELETE", f"{base}/{made.json()['id']}", auth(tenant), b""


async def _page_visit(http: httpx.AsyncClient, runtime: Runtime, tenant: Tenant) -> Request:
    ann = await contact(runtime, tenant.workspace_id, "visitor@example.com")
    site = (await http.get("/api/v1/funnels/site", headers=auth(tenant))).json()
    visitor = await http.get(f"/api/v1/funnels/contacts/{ann}/visitor-token", headers=auth(tenant))
    body = {"key": site["site_key"], "visitor": visitor.json()["token"], "id": "v1", "url": "/"}
    return "POST", "/t/c", {"content-type": "application/json"}, _json(body)


PREPARE: dict[tuple[str, str], Prepare] = {
    ("DELETE", "/api/v1/api-keys/{key_id:int}"): _api_key,
    ("DELETE", "/api/v1/secrets/{name:str}"): _secret,
    ("DELETE", "/api/v1/adrules/rules/{rule_id:int}/tasks/{task_id:int}"): _rule_task,
    ("DELETE", "/api/v1/funnels/contacts/{contact_id:int}"): _contact,
    ("DELETE", "/api/v1/ranktracking/schedules/{schedule_id:int}/alerts/{rule_id:int}"): (
        _alert_rule
    ),
    ("DELETE", "/api/v1/ranktracking/schedules/{schedule_id:int}/share-links/{link_id:int}"): (
        _report_link
    ),
    ("DELETE", "/api/v1/funnels/providers/{kind:str}"): _provider,
    ("DELETE", "/api/v1/ranktracking/geogrids/{geogrid_id:int}"): _geogrid,
    ("DELETE", "/api/v1/funnels/sources/{source_id:int}"): _source,
    ("DELETE", "/api/v1/funnels/saved-segments/{segment_id:int}"): _saved_segment,
    (
        "DELETE",
        "/api/v1/ranktracking/schedules/{schedule_id:int}/annotations/{annotation_id:int}",
    ): _annotation,
    ("POST", "/t/c"): _page_visit,
}
UNREACHABLE = {
    # Organisation-level: only a signed-in organisation manager may remove a person, and the
    # API authenticates workspace keys only, so every caller it has gets a 403.
    ("DELETE", "/api/v1/members/{user_id:int}"): 403,
}


def empty_status_routes(app: Litestar) -> set[tuple[str, str]]:
    """``(method, path)`` of every route declared to answer 204 or 304."""
    return {
        (method, path)
        for path, handler in route_handlers(app)
        if handler.status_code in EMPTY_STATUSES
        for method in handler.http_methods
    }


async def two_on_one_connection(
    url: str, method: str, path: str, headers: dict[str, str], body: bytes
) -> tuple[bytes, bytes]:
    """The raw first response's head, and every byte after it up to the end of the second
    response (``GET /health``, asking the server to close the connection after it)."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        lines = [f"{method} {path} HTTP/1.1", f"host: {parts.netloc}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append(f"content-length: {len(body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        await writer.drain()
        rest = await reader.read()
    finally:
        writer.close()
    return head, rest


async def test_pl9_every_204_route_answers_without_a_body_on_a_kept_alive_connection(
    settings: Settings, runtime: Runtime, tenant: Tenant
) -> None:
    app = create_app(settings, runtime, background=False)
    routes = empty_status_routes(app)
    assert routes - set(UNREACHABLE) == set(PREPARE), "each 204 route has its request here"
    async with serve_in_loop(app) as url, httpx.AsyncClient(base_url=url) as http:
        for (method, route), prepare in PREPARE.items():
            req_method, path, headers, body = await prepare(http, runtime, tenant)
            head, rest = await two_on_one_connection(url, req_method, path, headers, body)
            where = f"{method} {route}"
            assert head.startswith(b"HTTP/1.1 204 "), (where, head)
            assert b"\r\ncontent-length:" not in head.lower(), (where, head)
            assert b"\r\ntransfer-encoding:" not in head.lower(), (where, head)
            # The next bytes on the connection are the second response's status line.
            assert rest.startswith(b"HTTP/1.1 200 "), (where, rest[:80])
        for (method, route), status in UNREACHABLE.items():
            path = route.replace("{user_id:int}", "1")
            head, rest = await two_on_one_connection(url, method, path, auth(tenant), b"")
            assert head.startswith(f"HTTP/1.1 {status} ".encode()), (route, head)


@pytest.mark.parametrize("status", sorted(EMPTY_STATUSES))
async def test_pl9_a_handler_body_on_an_empty_status_is_dropped_by_the_application(
    settings: Settings, runtime: Runtime, status: int
) -> None:
    """Whatever a handler hands over with a 204 or 304 — a body and its content-length — the
    application sends none (the hook on the application, not each handler, holds the line)."""

    @asgi("/odd", opt=public("test"), copy_scope=False)
    async def odd(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-length", b"4")]
        start: HTTPResponseStartEvent = {
            "type": "http.response.start",
            "status": status,
            "headers": headers,
        }
        await send(start)
        body: HTTPResponseBodyEvent = {
            "type": "http.response.body",
            "body": b"null",
            "more_body": False,
        }
        await send(body)

    app = Litestar([odd], before_send=[no_body_on_empty_statuses])
    async with serve_in_loop(app) as url:
        head, rest = await two_on_one_connection(url, "GET", "/odd", {}, b"")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
    assert b"content-length" not in head.lower()
    assert rest.startswith(b"HTTP/1.1 404 "), rest[:80]
