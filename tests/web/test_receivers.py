"""Receivers (bare ASGI routes, ``app/web/receivers.py``) answer as every other route does: the
application's error format and statuses, its request id and security headers, its request bounds
and its access rules — only Litestar's per-request objects are left out."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest
from litestar import Litestar, Router
from litestar.exceptions import ImproperlyConfiguredException

from app.engines.funnels.events.models import InboundEvent
from app.web.access import public, public_routes, route_handlers, verify_routes
from app.web.receivers import Incoming, RawHeaders, ReceiverRoute, receiver
from tests.engines.funnels.factories import count
from tests.platform.test_errors import assert_error

EVENTS = "/hooks/funnels/events"


def event(event_id: str) -> dict[str, Any]:
    return {"event_id": event_id, "name": "order_placed", "contact": {"email": "a@example.com"}}


async def test_an_accepted_event_carries_the_request_id_and_the_security_headers(
    client: httpx.AsyncClient, tenant: Any
) -> None:
    r = await client.post(
        EVENTS, json=event("e-1"), headers={"X-Ingest-Token": tenant.ingest_token}
    )
    assert r.status_code == 202, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"stored": True, "id": r.json()["id"]}
    assert len(r.headers["x-request-id"]) == 16
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in r.headers["content-security-policy"]


async def test_another_method_is_405_naming_the_one_allowed(client: httpx.AsyncClient) -> None:
    r = await client.get(EVENTS)
    assert_error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_an_oversized_body_is_413_and_stores_nothing(
    client: httpx.AsyncClient, runtime: Any, tenant: Any
) -> None:
    limit = runtime.settings.web.max_body_bytes
    body = msgspec.json.encode({**event("e-big"), "properties": {"x": "y" * limit}})
    r = await client.post(
        EVENTS,
        content=body,
        headers={"X-Ingest-Token": tenant.ingest_token, "content-type": "application/json"},
    )
    assert str(limit) in assert_error(r, 413, "body_too_large")["message"]
    assert await count(runtime, InboundEvent) == 0


async def test_refusals_are_the_applications_errors(
    client: httpx.AsyncClient, runtime: Any, tenant: Any
) -> None:
    token = {"X-Ingest-Token": tenant.ingest_token}
    assert_error(
        await client.post(EVENTS, json=event("e-2"), headers={"X-Ingest-Token": "wrong"}),
        401,
        "unauthorized",
    )
    assert_error(await client.post(EVENTS, json=event("e-3")), 401, "unauthorized")
    bad = await client.post(EVENTS, json={**event("e-4"), "extra": 1}, headers=token)
    assert "extra" in assert_error(bad, 422, "validation_failed")["details"][0]["message"]
    nul = await client.post(
        EVENTS,
        content=b'{"event_id": "e-5\\u0000"}',
        headers={**token, "content-type": "application/json"},
    )
    assert_error(nul, 422, "validation_failed")  # the request bounds, ahead of the receiver
    assert await count(runtime, InboundEvent) == 0


def test_raw_headers_find_a_name_and_keep_the_first_of_repeated_ones() -> None:
    headers = RawHeaders([(b"x-ingest-token", b"one"), (b"x-ingest-token", b"two")])
    assert headers.get("x-ingest-token") == "one"
    assert headers.get("x-sweepline-signature") is None


async def _answer(incoming: Incoming) -> Any:
    raise AssertionError("not called")


def test_receivers_are_listed_with_their_method_and_held_to_the_access_rules(
    client: httpx.AsyncClient,
) -> None:
    app: Litestar = client._transport.app  # type: ignore[attr-defined]
    listed = {path: handler for path, handler in route_handlers(app)}
    assert isinstance(listed[EVENTS], ReceiverRoute)
    assert ("POST", EVENTS) in public_routes(app)

    undeclared = Litestar(
        route_handlers=[receiver("/hooks/x", status_code=202)(_answer)], openapi_config=None
    )
    with pytest.raises(ImproperlyConfiguredException, match="POST /hooks/x"):
        verify_routes(undeclared)
    declared = Router(
        path="/", route_handlers=[receiver("/hooks/y", status_code=202)(_answer)], opt=public("t")
    )
    verify_routes(Litestar(route_handlers=[declared], openapi_config=None))
