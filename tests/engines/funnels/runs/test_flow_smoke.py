"""A first end-to-end pass: trigger → run → send → wait → condition → goal."""

from __future__ import annotations

from app.engines.funnels.models import RUN_ACTIVE, RUN_COMPLETED
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    email_node,
    graph,
    node,
    published,
    runs_of,
    setup_names,
    steps_of,
)


async def test_welcome_flow_end_to_end(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    rt = engine.runtime
    await setup_names(rt, ws, tags=["customer"])
    funnel_id, _ = await published(
        rt,
        ws,
        graph(
            email_node("hello", subject="Welcome {{first_name}}", next="w"),
            node("wait", "w", days=2, next="c"),
            node(
                "condition",
                "c",
                predicate={"kind": "has_tag", "tag": "customer"},
                yes="g",
                no="nudge",
            ),
            email_node("nudge", subject="Still there?", next="g"),
            node("goal", "g"),
            triggers=[{"kind": "contact_created"}],
        ),
    )
    await contact(rt, ws, "ada@example.com", first_name="Ada")
    await engine.drive()
    [run] = await runs_of(rt, funnel_id)
    assert run.status == RUN_ACTIVE
    assert run.current_node == "w"
    assert [m.subject for m in engine.sink.messages] == ["Welcome Ada"]
    await engine.advance(days=2)
    [run] = await runs_of(rt, funnel_id)
    assert run.status == RUN_COMPLETED
    assert [m.subject for m in engine.sink.messages] == ["Welcome Ada", "Still there?"]
    steps = await steps_of(rt, run.id)
    assert [(s.node_id, s.decision) for s in steps][2:] == [
        ("w", "wait over"),
        ("c", "no"),
        ("nudge", "queued"),
        ("g", "goal reached"),
    ]
