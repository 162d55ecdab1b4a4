"""The simulator (FN-27): a real contact walks a draft or published graph on a simulated clock;
the path and every rendered message come back with day and time; nothing is written or sent."""

from __future__ import annotations

from app.engines.funnels.events.models import InboundEvent
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
    ContactTag,
    DeliveryEvent,
    OutboxEffect,
    Run,
    Step,
    ThrottleWindow,
)
from tests.conftest import auth
from tests.engines.funnels.factories import (
    contact,
    count,
    email_node,
    graph,
    node,
    published,
    setup_names,
)

TABLES = (
    Contact,
    ContactEvent,
    ContactTag,
    DeliveryEvent,
    OutboxEffect,
    Run,
    Step,
    ThrottleWindow,
    InboundEvent,
)


async def _counts(runtime) -> dict[str, int]:
    return {m.__tablename__: await count(runtime, m) for m in TABLES}


def welcome() -> dict:
    return graph(
        email_node("hello", subject="Welcome {{first_name}}", body="Hi {{first_name}}", next="tag"),
        node("add_tag", "tag", tag="welcomed", next="wait"),
        node("wait", "wait", days=2, hour=9, until_event="message_opened", next="check"),
        node(
            "condition",
            "check",
            predicate={"kind": "has_tag", "tag": "welcomed"},
            yes="throttle",
            no="done",
        ),
        node("throttle", "throttle", limit=1, period_seconds=3600, next="followup"),
        email_node("followup", subject="Still there, {{first_name}}?", body="Day two", next="done"),
        node("goal", "done"),
        triggers=[{"kind": "manual"}],
        settings={"quiet_start_hour": 21, "quiet_end_hour": 8},
    )


async def test_fn27_simulation_reports_path_and_messages_and_writes_nothing(
    client, runtime, tenant, sink, clock
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["welcomed"])
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann", timezone="Europe/Berlin")
    funnel_id, _ = await published(runtime, ws, welcome())
    clock.set(clock.now().replace(hour=21, minute=30))  # 22:30 in Berlin: quiet hours
    before = await _counts(runtime)
    r = await client.post(
        f"/api/v1/funnels/{funnel_id}/simulation",
        json={"contact_id": ann, "source": "published"},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    sim = r.json()
    assert sim["entered"] is True
    assert sim["outcome"] == "completed"
    assert [s["node_id"] for s in sim["path"]] == [
        "hello",
        "tag",
        "wait",
        "wait",
        "check",
        "throttle",
        "followup",
        "done",
    ]
    assert "never arrives" in sim["path"][2]["decision"]
    first, second = sim["messages"]
    assert first["content"]["subject"] == "Welcome Ann"
    assert first["local_time"] == "Tue 2026-03-03 08:00 Europe/Berlin"  # held to the morning
    assert first["day"] == 1
    assert second["content"]["subject"] == "Still there, Ann?"
    assert second["local_time"] == "Wed 2026-03-04 09:00 Europe/Berlin"
    assert second["day"] == 2
    # Nothing left the building: no row anywhere changed, no message was sent.
    assert await _counts(runtime) == before
    assert sink.snapshot() == []


async def test_fn27_simulates_a_draft_and_the_entry_predicate(client, runtime, tenant) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["welcomed", "vip"])
    ann = await contact(runtime, ws, "ann@example.com", first_name="Ann")
    funnel_id, _ = await published(runtime, ws, welcome())
    from app.engines.funnels.definitions.service import parse_definition, update_funnel

    draft = graph(
        email_node("only", subject="Draft {{first_name}}"),
        entry_predicate={"kind": "has_tag", "tag": "vip"},
    )
    async with runtime.db.write() as uow:
        await update_funnel(
            uow.session, ws, funnel_id, now=runtime.clock.now(), definition=parse_definition(draft)
        )
    refused = await client.post(
        f"/api/v1/funnels/{funnel_id}/simulation", json={"contact_id": ann}, headers=auth(tenant)
    )
    assert refused.json()["entered"] is False
    assert refused.json()["outcome"] == "not admitted"
    await setup_names(runtime, ws, tags=["vip"])
    from app.engines.funnels.contacts.memberships import add_tag

    async with runtime.db.write() as uow:
        row = await uow.session.get(Contact, ann)
        await add_tag(uow.session, row, "vip", runtime.clock.now())
    ok = (
        await client.post(
            f"/api/v1/funnels/{funnel_id}/simulation",
            json={"contact_id": ann},
            headers=auth(tenant),
        )
    ).json()
    assert [m["content"]["subject"] for m in ok["messages"]] == ["Draft Ann"]


async def test_fn27_simulation_is_scoped_to_the_workspace(
    client, runtime, tenant, other_tenant
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["welcomed"])
    ann = await contact(runtime, ws, "ann@example.com")
    funnel_id, _ = await published(runtime, ws, welcome())
    foreign = await client.post(
        f"/api/v1/funnels/{funnel_id}/simulation",
        json={"contact_id": ann},
        headers=auth(other_tenant),
    )
    assert foreign.status_code == 404
    bad = await client.post(
        f"/api/v1/funnels/{funnel_id}/simulation",
        json={"contact_id": ann, "horizon_days": 0},
        headers=auth(tenant),
    )
    assert bad.status_code == 422
