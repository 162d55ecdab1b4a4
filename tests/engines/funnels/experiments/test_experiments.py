"""Experiments driven through real runs on the deterministic clock: deterministic assignment per
contact (FN-54), the report per branch and its verdict (FN-55), the automatic winner recorded
and reversible (FN-56), the holdout that gets nothing and is counted (FN-57), and a broken
experiment refused by the validator (FN-53)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.definitions.graph import Split, SplitBranch
from app.engines.funnels.experiments.assign import experiment_branch, held_out
from app.engines.funnels.experiments.winners import decide_all
from app.engines.funnels.models import OutboxEffect, Run, Step
from tests.conftest import auth
from tests.engines.funnels.factories import (
    Engine,
    bulk_contacts,
    count,
    email_node,
    graph,
    node,
    published,
    runs_of,
    setup_names,
)
from tests.engines.funnels.outbox.test_unsubscribe import _enrol

SPLIT = Split(
    id="ab",
    branches=[SplitBranch(name="a", weight=1, next="g"), SplitBranch(name="b", weight=1, next="t")],
)


def experiment_graph(**experiment: Any) -> dict[str, Any]:
    """Branch ``a`` reaches the goal at once; branch ``b`` only gets a tag."""
    return graph(
        node(
            "split",
            "ab",
            branches=[
                {"name": "a", "weight": 1, "next": "g"},
                {"name": "b", "weight": 1, "next": "t"},
            ],
            experiment={"goal_node": "g", "min_sample": 5, **experiment},
        ),
        node("goal", "g"),
        node("add_tag", "t", tag="seen"),
        triggers=[{"kind": "manual"}],
        settings={"reentry": True},
    )


async def _branches(runtime, funnel_id: int) -> dict[int, list[tuple[str, str]]]:
    """Contact -> [(branch, assignment)] of every pass through the split, in order."""
    async with runtime.db.read() as s:
        rows = await s.execute(
            select(Run.contact_id, Step.output)
            .join(Run, Run.id == Step.run_id)
            .where(Run.funnel_id == funnel_id, Step.node_id == "ab")
            .order_by(Step.id)
        )
        out: dict[int, list[tuple[str, str]]] = {}
        for contact_id, output in rows:
            out.setdefault(contact_id, []).append((output["branch"], output.get("assignment", "")))
        return out


async def _report(client, tenant, funnel_id: int) -> dict[str, Any]:
    got = await client.get(f"/api/v1/funnels/{funnel_id}/experiments", headers=auth(tenant))
    assert got.status_code == 200, got.text
    return got.json()


async def test_fn54_assignment_is_a_hash_of_experiment_and_contact_and_reentry_keeps_it(
    runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["seen"])
    funnel_id, _ = await published(runtime, ws, experiment_graph())
    people = await bulk_contacts(runtime, ws, 30)
    for person in people:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    for person in people:  # re-entry: every first run has ended
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    seen = await _branches(runtime, funnel_id)
    assert set(seen) == set(people)
    for person, passes in seen.items():
        expected = experiment_branch(funnel_id, SPLIT, person)
        assert passes == [(expected, "assigned"), (expected, "assigned")]
    names = {passes[0][0] for passes in seen.values()}
    assert names == {"a", "b"}


async def test_fn55_report_per_branch_matches_the_runs_and_gives_a_verdict(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["seen"])
    funnel_id, _ = await published(runtime, ws, experiment_graph(value_minor=250))
    people = await bulk_contacts(runtime, ws, 40)
    for person in people:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    expected = {"a": 0, "b": 0}
    for person in people:
        expected[experiment_branch(funnel_id, SPLIT, person)] += 1
    [exp] = (await _report(client, tenant, funnel_id))["experiments"]
    by = {b["name"]: b for b in exp["branches"]}
    assert by["a"]["entered"] == expected["a"]
    assert by["a"]["converted"] == expected["a"]
    assert by["b"]["entered"] == expected["b"]
    assert by["b"]["converted"] == 0
    assert by["a"]["rate"] == 1.0
    assert by["b"]["rate"] == 0.0
    assert by["a"]["revenue_minor"] == 250 * expected["a"]
    assert by["a"]["ci_low"] < 1.0
    assert by["a"]["ci_high"] == 1.0
    assert exp["verdict"] == "winner"
    assert exp["verdict_winner"] == "a"
    assert exp["standing_winner"] is None  # no auto_winner: the verdict routes nobody


async def test_fn55_event_goal_with_revenue_and_minimum_sample(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["seen"])
    definition = experiment_graph()
    split = definition["nodes"][0]
    split["experiment"] = {
        "goal_event": "purchase",
        "value_property": "amount_minor",
        "min_sample": 1000,
        "window_days": 7,
    }
    funnel_id, _ = await published(runtime, ws, definition)
    people = await bulk_contacts(runtime, ws, 12)
    for person in people:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    engine.clock.advance(days=1)
    buyers = people[:4]
    async with runtime.db.write() as uow:
        for person in buyers:
            await record_event(
                uow.session,
                workspace_id=ws,
                contact_id=person,
                name="purchase",
                source="api",
                now=engine.clock.now(),
                properties={"amount_minor": 1999},
            )
        # outside the 7-day window: not a conversion
        await record_event(
            uow.session,
            workspace_id=ws,
            contact_id=people[5],
            name="purchase",
            source="api",
            now=engine.clock.now(),
            occurred_at=engine.clock.now().replace(year=2030),
            properties={"amount_minor": 5},
        )
    [exp] = (await _report(client, tenant, funnel_id))["experiments"]
    converted = {"a": 0, "b": 0}
    for person in buyers:
        converted[experiment_branch(funnel_id, SPLIT, person)] += 1
    by = {b["name"]: b for b in exp["branches"]}
    for name in ("a", "b"):
        assert by[name]["converted"] == converted[name]
        assert by[name]["revenue_minor"] == 1999 * converted[name]
    assert exp["verdict"] == "collecting"
    assert "1000" in exp["verdict_message"]


async def test_fn56_automatic_winner_is_recorded_routes_new_entrants_and_is_reversible(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    await setup_names(runtime, ws, tags=["seen"])
    funnel_id, _ = await published(runtime, ws, experiment_graph(auto_winner=True))
    first = await bulk_contacts(runtime, ws, 40, prefix="first")
    for person in first:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    async with runtime.db.write() as uow:
        assert await decide_all(uow.session, now=engine.clock.now()) == 1
    report = await _report(client, tenant, funnel_id)
    [exp] = report["experiments"]
    assert exp["standing_winner"] == "a"
    [decision] = exp["history"]
    assert decision["decided_by"] == "automatic"
    assert decision["reverted_at"] is None

    later = await bulk_contacts(runtime, ws, 10, prefix="later")
    for person in later:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    seen = await _branches(runtime, funnel_id)
    assert all(seen[p] == [("a", "winner")] for p in later)
    [exp] = (await _report(client, tenant, funnel_id))["experiments"]
    by = {b["name"]: b for b in exp["branches"]}
    assert by["a"]["routed_to_winner"] == 10
    assert by["a"]["entered"] + by["b"]["entered"] == 40  # the verdict counts random ones only

    reverted = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winner/revert", headers=auth(tenant)
    )
    assert reverted.status_code == 200, reverted.text
    assert reverted.json()["reverted_at"] is not None
    again = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winner/revert", headers=auth(tenant)
    )
    assert again.status_code == 404
    async with runtime.db.write() as uow:  # a person's revert stands: no automatic re-decision
        assert await decide_all(uow.session, now=engine.clock.now()) == 0
    last = await bulk_contacts(runtime, ws, 10, prefix="last")
    for person in last:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    seen = await _branches(runtime, funnel_id)
    for person in last:
        assert seen[person] == [(experiment_branch(funnel_id, SPLIT, person), "assigned")]
    history = await client.get(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winners", headers=auth(tenant)
    )
    assert [h["decided_by"] for h in history.json()] == ["automatic"]

    # A person declares one; a second declaration while it stands is refused.
    declared = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winner",
        json={"branch": "b", "reason": "brand choice"},
        headers=auth(tenant),
    )
    assert declared.status_code == 201, declared.text
    assert declared.json()["decided_by"] == "person"
    twice = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winner",
        json={"branch": "a"},
        headers=auth(tenant),
    )
    assert twice.status_code == 409
    unknown = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winner/revert", headers=auth(tenant)
    )
    assert unknown.status_code == 200
    bad = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winner",
        json={"branch": "zzz"},
        headers=auth(tenant),
    )
    assert bad.status_code == 422
    assert "branch" in bad.text
    nowhere = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/nope/winner",
        json={"branch": "a"},
        headers=auth(tenant),
    )
    assert nowhere.status_code == 404


async def test_fn56_other_workspace_sees_404(client, runtime, tenant, other_tenant) -> None:
    await setup_names(runtime, tenant.workspace_id, tags=["seen"])
    funnel_id, _ = await published(runtime, tenant.workspace_id, experiment_graph())
    for path in ("experiments", "analytics/series", "analytics/outcomes"):
        got = await client.get(f"/api/v1/funnels/{funnel_id}/{path}", headers=auth(other_tenant))
        assert got.status_code == 404, path
    got = await client.post(
        f"/api/v1/funnels/{funnel_id}/experiments/ab/winner",
        json={"branch": "a"},
        headers=auth(other_tenant),
    )
    assert got.status_code == 404


async def test_fn57_holdout_gets_nothing_is_counted_and_lift_is_reported(
    client, runtime, tenant, engine: Engine
) -> None:
    ws = tenant.workspace_id
    definition = graph(
        email_node("hello", subject="Hi", body="Welcome"),
        triggers=[{"kind": "manual"}],
        settings={"holdout": {"percent": 50, "goal_event": "purchase", "window_days": 30}},
    )
    funnel_id, _ = await published(runtime, ws, definition)
    people = await bulk_contacts(runtime, ws, 40)
    for person in people:
        await _enrol(runtime, funnel_id, person)
    await engine.drive()
    control = [p for p in people if held_out(funnel_id, p, 50)]
    treated = [p for p in people if p not in control]
    assert control
    assert treated
    runs = {r.contact_id: r for r in await runs_of(runtime, funnel_id)}
    for person in control:
        assert (runs[person].status, runs[person].exit_reason) == ("exited", "holdout")
        assert await count(runtime, Step, Step.run_id == runs[person].id) == 0
        assert await count(runtime, OutboxEffect, OutboxEffect.contact_id == person) == 0
    assert sorted(m.to[0] for m in engine.sink.messages) == sorted(
        f"bulk{people.index(p)}@x.test" for p in treated
    )
    # converting: 2 of the control group, 6 of the treated group
    async with runtime.db.write() as uow:
        for person in control[:2] + treated[:6]:
            await record_event(
                uow.session,
                workspace_id=ws,
                contact_id=person,
                name="purchase",
                source="api",
                now=engine.clock.now(),
            )
    holdout = (await _report(client, tenant, funnel_id))["holdout"]
    assert holdout["control"]["entered"] == len(control)
    assert holdout["treated"]["entered"] == len(treated)
    assert (holdout["control"]["converted"], holdout["treated"]["converted"]) == (2, 6)
    rc, rt = 2 / len(control), 6 / len(treated)
    assert abs(holdout["lift"] - (rt - rc) / rc) < 1e-9
    # the funnel report does not show held-out contacts as ended early at the first node
    report = (await client.get(f"/api/v1/funnels/{funnel_id}/report", headers=auth(tenant))).json()
    [hello] = report["versions"][0]["nodes"]
    assert hello["exited"] == 0
    assert hello["entered"] == len(treated)


async def test_fn57_holdout_keeps_its_place_on_reentry(runtime, tenant, engine: Engine) -> None:
    ws = tenant.workspace_id
    definition = graph(
        email_node("hello", subject="Hi", body="Welcome"),
        triggers=[{"kind": "manual"}],
        settings={"reentry": True, "holdout": {"percent": 30, "goal_event": "purchase"}},
    )
    funnel_id, _ = await published(runtime, ws, definition)
    people = await bulk_contacts(runtime, ws, 20)
    for _ in range(2):
        for person in people:
            await _enrol(runtime, funnel_id, person)
        await engine.drive()
    runs = await runs_of(runtime, funnel_id)
    assert len(runs) == 40
    for person in people:
        reasons = {r.exit_reason for r in runs if r.contact_id == person}
        assert reasons == ({"holdout"} if held_out(funnel_id, person, 30) else {"completed"})


async def test_fn53_validator_refuses_an_experiment_without_one_goal(client, tenant) -> None:
    definition = experiment_graph()
    definition["nodes"][0]["experiment"] = {"goal_node": "t", "value_property": "x"}
    made = await client.post(
        "/api/v1/funnels",
        json={"name": "E", "definition": definition},
        headers=auth(tenant),
    )
    assert made.status_code == 201, made.text
    checked = await client.post(
        f"/api/v1/funnels/{made.json()['id']}/validate", headers=auth(tenant)
    )
    problems = checked.json()["problems"]
    codes = {(p["rule"], p["code"], p["node_id"]) for p in problems}
    assert ("FN-53", "experiment_goal_node", "ab") in codes
    assert ("FN-53", "experiment_value_property", "ab") in codes
