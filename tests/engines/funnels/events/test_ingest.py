"""Event ingestion (FN-13): stored first, answered, processed off the request path, idempotent on
the sender's id, authenticated by ingest token or HMAC signature; entry conditions (FN-12)."""

from __future__ import annotations

from sqlalchemy import select

from app.engines.funnels.deps import CACHE_SECONDS
from app.engines.funnels.events.ingest import batch_events, process_batch, store
from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.models import Contact, ContactEvent, Run
from app.platform.service import rotate_ingest_token
from tests.conftest import is_postgres
from tests.engines.funnels.factories import (
    contact,
    count,
    runs_of,
    settle,
    setup_names,
    signed,
    tagging_funnel,
)


def api_event(event_id: str, email: str = "ann@example.com", **kw: object) -> dict[str, object]:
    return {"event_id": event_id, "name": "order_placed", "contact": {"email": email}, **kw}


async def test_fn13_api_event_is_stored_first_then_starts_a_run(client, runtime, tenant) -> None:
    """FN-13: the request stores one inbound row and answers; a run exists only after the
    processing job matched the event to the funnel."""
    ws = tenant.workspace_id
    await contact(runtime, ws, "ann@example.com")
    funnel_id = await tagging_funnel(runtime, ws, {"kind": "api_event", "event": "order_placed"})
    response = await client.post(
        "/hooks/funnels/events",
        json=api_event("evt-1", properties={"total": 42}),
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert response.status_code == 202, response.text
    assert response.json()["stored"] is True
    assert await count(runtime, InboundEvent) == 1
    assert await runs_of(runtime, funnel_id) == []  # matching is off the request path
    await settle(runtime)
    runs = await runs_of(runtime, funnel_id)
    assert len(runs) == 1
    async with runtime.db.read() as s:
        event = await s.scalar(select(ContactEvent).where(ContactEvent.name == "order_placed"))
    assert event is not None
    assert event.properties == {"total": 42}


async def test_fn13_duplicated_webhook_stores_one_event(client, runtime, tenant) -> None:
    """FN-13: the same sender event id twice → one inbound event, one contact event, one run."""
    ws = tenant.workspace_id
    await contact(runtime, ws, "ann@example.com")
    funnel_id = await tagging_funnel(runtime, ws, {"kind": "api_event", "event": "order_placed"})
    headers = {"X-Ingest-Token": tenant.ingest_token}
    first = await client.post("/hooks/funnels/events", json=api_event("evt-dup"), headers=headers)
    await settle(runtime)
    second = await client.post("/hooks/funnels/events", json=api_event("evt-dup"), headers=headers)
    assert first.json()["stored"] is True
    assert second.status_code == 202
    assert second.json()["stored"] is False
    await settle(runtime)
    assert await count(runtime, InboundEvent) == 1
    assert await count(runtime, ContactEvent, ContactEvent.name == "order_placed") == 1
    assert len(await runs_of(runtime, funnel_id)) == 1


async def test_fn13_a_rotated_ingest_token_works_until_its_cache_entry_expires(
    client, runtime, tenant, clock
) -> None:
    """FN-13: the receiver reuses a resolved ingest token for ``CACHE_SECONDS`` of the runtime's
    clock, so a rotated token is still accepted within that time and refused after it."""
    headers = {"X-Ingest-Token": tenant.ingest_token}
    first = await client.post("/hooks/funnels/events", json=api_event("evt-1"), headers=headers)
    assert first.status_code == 202, first.text
    async with runtime.db.write() as uow:
        await rotate_ingest_token(uow.session, tenant.workspace_id, now=clock.now())
    clock.advance(seconds=CACHE_SECONDS - 1)
    cached = await client.post("/hooks/funnels/events", json=api_event("evt-2"), headers=headers)
    assert cached.status_code == 202, cached.text
    clock.advance(seconds=1)
    expired = await client.post("/hooks/funnels/events", json=api_event("evt-3"), headers=headers)
    assert expired.status_code == 401, expired.text
    assert await count(runtime, InboundEvent) == 2


async def test_fn13_hmac_signature_authenticates(client, runtime, tenant, clock) -> None:
    body, headers = signed(
        tenant.webhook_secret,
        api_event("evt-signed"),
        workspace_id=tenant.workspace_id,
        at=int(clock.now().timestamp()),
    )
    await contact(runtime, tenant.workspace_id, "ann@example.com")
    response = await client.post("/hooks/funnels/events", content=body, headers=headers)
    assert response.status_code == 202, response.text
    await settle(runtime)
    assert await count(runtime, ContactEvent, ContactEvent.name == "order_placed") == 1


async def test_fn13_bad_signature_is_401_and_stores_nothing(
    client, runtime, tenant, other_tenant, clock
) -> None:
    """FN-13: a wrong secret, a tampered body or a stale timestamp → 401, nothing stored."""
    now = int(clock.now().timestamp())
    wrong, headers = signed(
        other_tenant.webhook_secret, api_event("e1"), workspace_id=tenant.workspace_id, at=now
    )
    r1 = await client.post("/hooks/funnels/events", content=wrong, headers=headers)
    body, headers = signed(
        tenant.webhook_secret, api_event("e2"), workspace_id=tenant.workspace_id, at=now
    )
    r2 = await client.post(
        "/hooks/funnels/events", content=body.replace(b"e2", b"e3"), headers=headers
    )
    stale, headers = signed(
        tenant.webhook_secret, api_event("e4"), workspace_id=tenant.workspace_id, at=now - 3600
    )
    r3 = await client.post("/hooks/funnels/events", content=stale, headers=headers)
    r4 = await client.post(
        "/hooks/funnels/events", json=api_event("e5"), headers={"X-Ingest-Token": "nope"}
    )
    r5 = await client.post("/hooks/funnels/events", json=api_event("e6"))
    for r in (r1, r2, r3, r4, r5):
        assert r.status_code == 401, r.text
        assert r.json()["code"] == "unauthorized"
    assert await count(runtime, InboundEvent) == 0


async def test_fn13_bad_input_is_4xx_and_stores_nothing(client, runtime, tenant) -> None:
    headers = {"X-Ingest-Token": tenant.ingest_token}
    bad = [
        b"not json",
        b'{"event_id": "x", "name": "n"}',
        b'{"event_id": "x", "name": "bad name!", "contact": {"email": "a@b.c"}}',
        b'{"event_id": "x", "name": "n", "contact": {}}',
        b'{"event_id": "x", "name": "n", "contact": {"email": "a@b.c"}, "surprise": 1}',
    ]
    for body in bad:
        r = await client.post("/hooks/funnels/events", content=body, headers=headers)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["code"] == "validation_failed"
    assert await count(runtime, InboundEvent) == 0


async def test_fn13_unknown_contact_is_dropped_with_reason_or_created(
    client, runtime, tenant
) -> None:
    headers = {"X-Ingest-Token": tenant.ingest_token}
    await client.post(
        "/hooks/funnels/events", json=api_event("u1", email="ghost@example.com"), headers=headers
    )
    await client.post(
        "/hooks/funnels/events",
        json=api_event("u2", email="new@example.com", create_contact=True),
        headers=headers,
    )
    await settle(runtime)
    async with runtime.db.read() as s:
        rows = {e.external_id: e for e in await s.scalars(select(InboundEvent))}
        created = await s.scalar(select(Contact).where(Contact.email == "new@example.com"))
    assert rows["u1"].outcome is not None
    assert rows["u1"].outcome.startswith("dropped")
    assert rows["u2"].outcome == "recorded"
    assert created is not None


async def test_fn12_entry_condition_is_checked_before_a_run_exists(client, runtime, tenant) -> None:
    """FN-12: the entry predicate decides at the door: no run row for a contact it refuses."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["customer"])
    await contact(runtime, ws, "ann@example.com", tags=["customer"])
    await contact(runtime, ws, "bob@example.com")
    funnel_id = await tagging_funnel(
        runtime,
        ws,
        {"kind": "api_event", "event": "order_placed"},
        entry_predicate={"kind": "has_tag", "tag": "customer"},
    )
    headers = {"X-Ingest-Token": tenant.ingest_token}
    await client.post(
        "/hooks/funnels/events", json=api_event("a", "ann@example.com"), headers=headers
    )
    await client.post(
        "/hooks/funnels/events", json=api_event("b", "bob@example.com"), headers=headers
    )
    await settle(runtime)
    runs = await runs_of(runtime, funnel_id)
    assert len(runs) == 1
    assert await count(runtime, Run) == 1


async def test_fn13_events_are_listed_per_workspace(client, runtime, tenant, other_tenant) -> None:
    from tests.conftest import auth

    await contact(runtime, tenant.workspace_id, "ann@example.com")
    await client.post(
        "/hooks/funnels/events",
        json=api_event("l1"),
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    await settle(runtime)
    mine = await client.get("/api/v1/funnels/events?name=order_placed", headers=auth(tenant))
    theirs = await client.get("/api/v1/funnels/events", headers=auth(other_tenant))
    inbound = await client.get("/api/v1/funnels/inbound", headers=auth(tenant))
    assert [e["name"] for e in mine.json()["items"]] == ["order_placed"]
    assert theirs.json()["items"] == []
    assert inbound.json()["items"][0]["outcome"] == "recorded"


async def test_fn13_stored_events_are_applied_in_short_transactions(runtime, tenant) -> None:
    """On SQLite a batch of stored events holds the one write lock every request waits for, so
    it applies only a few events (each transaction at most ``batch_events``); the processing
    job still applies every event it finds, batch after batch."""
    ws = tenant.workspace_id
    await contact(runtime, ws, "ann@example.com")
    async with runtime.db.write() as uow:
        for i in range(25):
            await store(
                uow.session,
                workspace_id=ws,
                source="api",
                name="order_placed",
                external_id=f"short-{i}",
                payload={"contact": {"email": "ann@example.com"}},
                now=runtime.clock.now(),
            )
    expected = 200 if is_postgres() else 10
    assert batch_events(runtime.db) == expected
    first = await process_batch(runtime.db, now=runtime.clock.now())
    assert first.processed == min(25, expected)
    await settle(runtime)
    async with runtime.db.read() as s:
        outcomes = list(await s.scalars(select(InboundEvent.outcome)))
    assert outcomes == ["recorded"] * 25
