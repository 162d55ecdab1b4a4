"""Funnel reports per version and node, recomputed from steps and delivery events (spec §9): the
status says ``delivering`` while every run has finished but mail still waits in the outbox;
opens and bounces count distinct messages (a repeated report does not inflate them); waiting,
exited and per-version counts follow the runs."""

from __future__ import annotations

from app.engines.funnels.contacts.deletion import delete_contact
from tests.conftest import auth
from tests.engines.funnels.factories import (
    Engine,
    contact,
    email_node,
    graph,
    node,
    published,
    republish,
    settle,
)
from tests.engines.funnels.outbox.test_unsubscribe import _enrol


def _node(report: dict, version: int, node_id: str) -> dict:
    [v] = [v for v in report["versions"] if v["version"] == version]
    [n] = [n for n in v["nodes"] if n["node_id"] == node_id]
    return n


async def _report(client, tenant, funnel_id: int) -> dict:
    got = await client.get(f"/api/v1/funnels/{funnel_id}/report", headers=auth(tenant))
    assert got.status_code == 200, got.text
    return got.json()


async def test_status_separates_finished_runs_from_mail_in_the_outbox_and_counts_per_node(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    funnel_id, _ = await published(
        runtime, ws, graph(email_node("hello", subject="Hi"), triggers=[{"kind": "manual"}])
    )
    people = [await contact(runtime, ws, f"p{i}@example.com") for i in range(2)]
    for person in people:
        await _enrol(runtime, funnel_id, person)
    await engine.drive(deliver=False)
    report = await _report(client, tenant, funnel_id)
    assert report["runs"] == {"completed": 2}
    assert report["status"] == "delivering"
    assert report["messages_in_outbox"] == 2
    assert _node(report, 1, "hello")["messages"]["queued"] == 2
    shown = await client.get(f"/api/v1/funnels/{funnel_id}", headers=auth(tenant))
    assert shown.json()["runs"] == {"completed": 2}
    assert shown.json()["messages_in_outbox"] == 2

    await engine.drive()
    by_to = {m.to[0]: m for m in engine.sink.messages}
    for event_id, kind, to in [
        ("o1", "opened", "p0@example.com"),
        ("o2", "opened", "p0@example.com"),  # opened again: still one opened message
        ("b1", "bounced", "p1@example.com"),
    ]:
        sent = await client.post(
            "/hooks/funnels/delivery",
            json={"event_id": event_id, "kind": kind, "message_id": by_to[to].message_id},
            headers={"X-Ingest-Token": tenant.ingest_token},
        )
        assert sent.status_code == 202
    await settle(runtime)
    report = await _report(client, tenant, funnel_id)
    assert report["status"] == "idle"
    hello = _node(report, 1, "hello")
    assert hello["entered"] == 2
    counts = hello["messages"]
    assert (counts["queued"], counts["sent"], counts["opened"], counts["bounced"]) == (0, 2, 1, 1)
    assert counts["rates"]["opened"] == 0.5
    assert counts["rates"]["clicked"] == 0.0


async def test_waiting_exited_goal_and_versions(client, runtime, tenant, engine: Engine) -> None:
    ws = tenant.workspace_id
    definition = graph(
        email_node("hello", next="w"),
        node("wait", "w", days=2, next="done"),
        node("goal", "done"),
        triggers=[{"kind": "manual"}],
    )
    funnel_id, _ = await published(runtime, ws, definition)
    people = [await contact(runtime, ws, f"q{i}@example.com") for i in range(3)]
    for person in people:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    async with runtime.db.write() as uow:
        await delete_contact(uow.session, ws, people[0], runtime.clock.now())
    report = await _report(client, tenant, funnel_id)
    assert report["status"] == "running"
    w = _node(report, 1, "w")
    assert (w["entered"], w["waiting"], w["exited"]) == (3, 2, 1)

    await republish(runtime, ws, funnel_id, definition)
    newcomer = await contact(runtime, ws, "new@example.com")
    await _enrol(runtime, funnel_id, newcomer)
    await engine.advance(days=2, minutes=1)
    report = await _report(client, tenant, funnel_id)
    assert _node(report, 1, "done")["goal_reached"] == 2
    assert _node(report, 2, "hello")["messages"]["sent"] == 1
    assert _node(report, 2, "w")["waiting"] == 1
    assert report["runs"] == {"cancelled": 1, "completed": 2, "active": 1}
