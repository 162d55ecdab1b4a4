"""Bad input on the public surface (FN-13 receivers): a NUL character anywhere in an event, a
form or a provider payload, or nesting beyond the bound, answers 422 in the error format and
stores nothing (on PostgreSQL a NUL would otherwise fail at the insert, as a 500)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.engines.funnels.events.models import InboundEvent
from app.web.input_guard import MAX_JSON_DEPTH, check_value, json_depth
from tests.conftest import auth
from tests.engines.funnels.factories import signed


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def _listed(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


async def _stored(runtime) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(InboundEvent)) or 0)


def _event(**overrides: object) -> dict:
    return {"event_id": "e1", "name": "signup", "contact": {"email": "a@example.com"}, **overrides}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_event(properties={"plan": "pro\u0000"}), "body"),
        (_event(properties={"k\u0000": 1}), "body"),
        (_event(contact={"email": "a\u0000@example.com"}), "body"),
        (_event(event_id="e\u0000"), "body"),
        (
            b'{"event_id": "e1", "name": "signup", "contact": {"email": "a@example.com"}, '
            b'"properties": {"deep": ' + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"}}",
            "body",
        ),
        (_event(properties={"list": _listed(40)}), "body"),
    ],
)
async def test_api_event_with_nul_or_deep_nesting_is_422_and_nothing_is_stored(
    client, runtime, tenant, body: dict | bytes, field: str
) -> None:
    got = await client.post(
        "/hooks/funnels/events",
        content=body if isinstance(body, bytes) else json.dumps(body).encode(),
        headers={"X-Ingest-Token": tenant.ingest_token, "Content-Type": "application/json"},
    )
    assert got.status_code == 422, got.text
    assert got.json()["code"] == "validation_failed"
    assert got.json()["details"][0]["field"].startswith(field)
    assert await _stored(runtime) == 0


async def test_a_raw_nul_byte_and_deep_arrays_in_provider_webhooks(client, runtime, tenant) -> None:
    ws = tenant.workspace_id
    raw = b'{"event_id": "d1", "kind": "bounced", "message_id": "<x\x00@y>"}'
    got = await client.post(
        "/hooks/funnels/delivery",
        content=raw,
        headers={"X-Ingest-Token": tenant.ingest_token, "Content-Type": "application/json"},
    )
    assert got.status_code == 422
    payment = {
        "id": "evt_1",
        "type": "payment_intent.succeeded",
        "data": {"object": {"metadata": _nested(100)}},
    }
    body, headers = signed(tenant.webhook_secret, payment, at=int(runtime.clock.now().timestamp()))
    got = await client.post(f"/hooks/funnels/{ws}/payments", content=body, headers=headers)
    assert got.status_code == 422, got.text
    assert await _stored(runtime) == 0


async def test_a_form_with_a_nul_character_is_refused_on_its_page(client, runtime, tenant) -> None:
    created = await client.post(
        "/api/v1/funnels/forms",
        json={"name": "News", "fields": [{"key": "first_name", "label": "Name"}]},
        headers=auth(tenant),
    )
    assert created.status_code == 201, created.text
    public_id = created.json()["public_id"]
    got = await client.post(
        f"/t/f/{public_id}",
        data={"email": "z@example.com", "first_name": "Zo\u0000e", "submission_id": "s1"},
    )
    assert got.status_code == 422
    assert "must not contain NUL characters" in got.text
    assert await _stored(runtime) == 0


def test_depth_ignores_brackets_inside_strings_and_the_walk_is_iterative() -> None:
    assert json_depth(b'{"a": "[[[[{{{{\\"]]]", "b": [1, {"c": []}]}') == 4
    check_value(_nested(MAX_JSON_DEPTH - 1))
    with pytest.raises(Exception, match="nested deeper"):
        check_value(_nested(100_000))
