"""Trigger filters and early-ending waits that test the event's properties, in the segment
predicate language (``{"kind": "event", "property": …, "op": …, "value": …}``): end to end from the
ingestion endpoint into runs (FN-12), a wait ended early only by the event that passes its filter
(FN-11, FN-14), and every misuse refused at publish with the node or trigger and the rule."""

from __future__ import annotations

from typing import Any

from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.contacts.segments import EventIs, decode_predicate, event_matches
from tests.conftest import auth
from tests.engines.funnels.factories import (
    contact,
    graph,
    node,
    published,
    runs_of,
    settle,
    setup_names,
    steps_of,
)

API = "/api/v1/funnels"
PRO_OVER_100 = {
    "kind": "all",
    "predicates": [
        {"kind": "event", "property": "plan", "op": "eq", "value": "pro"},
        {"kind": "event", "property": "amount", "op": "gt", "value": 100},
    ],
}


async def _event(
    client: Any, tenant: Any, event_id: str, name: str, who: int, **props: Any
) -> None:
    r = await client.post(
        "/hooks/funnels/events",
        json={"event_id": event_id, "name": name, "contact": {"id": who}, "properties": props},
        headers={"X-Ingest-Token": tenant.ingest_token},
    )
    assert r.status_code == 202, r.text


def test_event_predicates_compare_like_run_values() -> None:
    """Numbers as numbers, strings as strings, nested paths; a missing property is false
    except for ``not_exists``."""
    props = {"plan": "pro", "amount": 150, "customer": {"country": "DE"}, "items": [{"sku": "a"}]}
    assert event_matches(decode_predicate(PRO_OVER_100), props)
    assert not event_matches(decode_predicate(PRO_OVER_100), {**props, "amount": 100})
    assert not event_matches(decode_predicate(PRO_OVER_100), {**props, "amount": "150"})
    assert event_matches(EventIs(property="customer.country", op="eq", value="DE"), props)
    assert event_matches(EventIs(property="items.0.sku", op="eq", value="a"), props)
    assert event_matches(EventIs(property="coupon", op="not_exists"), props)
    assert not event_matches(EventIs(property="coupon", op="ne", value="x"), props)


async def test_a_trigger_filter_admits_only_events_whose_properties_pass(
    client, runtime, tenant
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["upgraded"])
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            node("add_tag", "t", tag="upgraded"),
            triggers=[{"kind": "api_event", "event": "upgrade", "filter": PRO_OVER_100}],
        ),
    )
    people = {
        name: await contact(runtime, ws, f"{name}@example.com")
        for name in ("ann", "bob", "cat", "dan", "eve")
    }
    await _event(client, tenant, "e1", "upgrade", people["ann"], plan="pro", amount=150)
    await _event(client, tenant, "e2", "upgrade", people["bob"], plan="pro", amount=100)
    await _event(client, tenant, "e3", "upgrade", people["cat"], plan="free", amount=500)
    await _event(client, tenant, "e4", "upgrade", people["dan"])
    await _event(client, tenant, "e5", "upgrade", people["eve"], plan="pro", amount="150")
    await settle(runtime)
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [people["ann"]]


async def test_a_payment_trigger_filters_on_the_payment_properties(client, runtime, tenant) -> None:
    """The provider's fields as the event carries them (``amount_minor``, ``currency``)."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["big"])
    big = {"kind": "event", "property": "amount_minor", "op": "gte", "value": 10_000}
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            node("add_tag", "t", tag="big"),
            triggers=[{"kind": "payment_made", "filter": big}],
        ),
    )
    ann = await contact(runtime, ws, "ann@example.com")
    bob = await contact(runtime, ws, "bob@example.com")
    async with runtime.db.write() as uow:
        for who, amount in ((ann, 25_000), (bob, 9_999)):
            await record_event(
                uow.session,
                workspace_id=ws,
                contact_id=who,
                name="payment_made",
                source="payment",
                properties={"amount_minor": amount, "currency": "eur"},
                now=runtime.clock.now(),
            )
    await settle(runtime)
    assert [r.contact_id for r in await runs_of(runtime, funnel_id)] == [ann]


async def test_a_wait_ends_early_only_on_the_event_its_filter_admits(
    client, runtime, tenant, engine, clock
) -> None:
    """FN-14: a purchase under 100 leaves the run waiting; one over 100 ends the wait."""
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["nudged", "thanks"])
    funnel_id, _ = await published(
        runtime,
        ws,
        graph(
            node(
                "wait",
                "w",
                days=3,
                until_event="purchase",
                event_filter={"kind": "event", "property": "total", "op": "gt", "value": 100},
                next="nudge",
                event_next="thanks",
            ),
            node("add_tag", "nudge", tag="nudged"),
            node("add_tag", "thanks", tag="thanks"),
            triggers=[{"kind": "api_event", "event": "signup"}],
        ),
    )
    ann = await contact(runtime, ws, "ann@example.com")
    await _event(client, tenant, "s1", "signup", ann)
    await settle(runtime)
    await engine.drive()
    clock.advance(hours=5)
    await _event(client, tenant, "p1", "purchase", ann, total=40)
    await settle(runtime)
    await engine.drive()
    run = (await runs_of(runtime, funnel_id))[0]
    assert run.status == "active"
    assert run.current_node == "w"
    assert run.woken_by is None
    clock.advance(hours=5)
    await _event(client, tenant, "p2", "purchase", ann, total=140)
    await settle(runtime)
    await engine.drive()
    run = (await runs_of(runtime, funnel_id))[0]
    assert run.status == "completed"
    assert [s.node_id for s in await steps_of(runtime, run.id)] == ["w", "w", "thanks"]


async def test_misused_filters_and_reentry_settings_are_refused_with_node_and_rule(
    client, runtime, tenant
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["vip"])
    definition = {
        "nodes": [
            {
                "kind": "wait",
                "id": "w",
                "entry": True,
                "days": 1,
                "event_filter": {"kind": "event", "property": "total", "op": "gt"},
            }
        ],
        "triggers": [
            {"kind": "api_event", "event": "upgrade", "filter": {"kind": "has_tag", "tag": "vip"}},
            {"kind": "schedule", "filter": {"kind": "event", "property": "plan", "op": "exists"}},
            {
                "kind": "api_event",
                "event": "x",
                "filter": {"kind": "event", "property": "a..b", "op": "exists"},
            },
        ],
        "entry_predicate": {"kind": "event", "property": "plan", "op": "eq", "value": "pro"},
        "settings": {"reentry_days": 7},
    }
    created = await client.post(
        API, json={"name": "Filters", "definition": definition}, headers=auth(tenant)
    )
    assert created.status_code == 201, created.text
    refused = await client.post(
        f"{API}/{created.json()['id']}/publish", json={}, headers=auth(tenant)
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_graph"
    problems = {(p["node_id"], p["rule"], p["message"]) for p in refused.json()["details"]}
    assert (
        "w",
        "FN-14",
        "an event filter needs the event that ends the wait early ('until_event')",
    ) in problems
    assert (
        "w",
        "FN-14",
        "event filter: operator 'gt' on event property 'total' needs a value",
    ) in (problems)
    messages = {m for node_id, _, m in problems if node_id is None}
    assert (
        "trigger 1 (api_event): filter: a filter tests the event's properties only, not "
        "'has_tag': put conditions on the contact in the entry conditions"
    ) in messages
    assert any(m.startswith("trigger 2 (schedule): starts without an event") for m in messages)
    assert any(
        m.startswith("trigger 3 (api_event): filter: event property 'a..b'") for m in messages
    )
    assert (
        "entry predicate: event property 'plan' exists only in a trigger's filter or a wait's "
        "event filter"
    ) in messages
    assert ("settings: 'reentry_days' limits re-entry, which is off ('reentry': false)") in messages


async def test_bad_filter_and_reentry_shapes_are_a_422_naming_the_field(client, tenant) -> None:
    """Schema errors, before any validation: a field-level 422 in the error format."""
    for bad, where in (
        ({"settings": {"reentry": True, "reentry_days": 0}}, "settings.reentry_days"),
        ({"settings": {"reentry": True, "reentry_days": "7"}}, "settings.reentry_days"),
        (
            {"triggers": [{"kind": "api_event", "event": "x", "filter": {"kind": "event"}}]},
            "triggers[0].filter",
        ),
        (
            {
                "triggers": [
                    {
                        "kind": "api_event",
                        "event": "x",
                        "filter": {"kind": "event", "property": "p", "op": "like", "value": 1},
                    }
                ]
            },
            "triggers[0].filter.op",
        ),
    ):
        r = await client.post(
            API, json={"name": "Bad", "definition": {"nodes": [], **bad}}, headers=auth(tenant)
        )
        assert r.status_code == 422, (bad, r.text)
        assert where in r.text, r.text
