"""A runner batch's writes (app/engines/funnels/runs/work/batch_writes.py) store every value as
given, on each database: times in any zone as the same instant, documents with their nesting,
numbers and text, text with quotes and line ends, empty values as NULL (FN-6 to FN-8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy import select

from app.engines.funnels.models import OutboxEffect, Run, Step
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.work.batch_writes import write_batch
from tests.engines.funnels.factories import Engine, Space, contact, email_node, graph, published

EAST = timezone(timedelta(hours=5, minutes=30))
CONTEXT = {"vars": {"name": 'Zoë "q" \\ \n', "n": 1.25, "big": 2**53 + 1}, "list": [None, True]}


async def test_steps_effects_and_advances_are_stored_as_given(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    _, version = await published(engine.runtime, ws, graph(email_node("e")))
    cid = await contact(engine.runtime, ws, "a@x.test")
    now = datetime(2026, 3, 2, 9, 0, 0, 123456, tzinfo=UTC)
    wake = datetime(2026, 3, 5, 14, 30, 0, 654321, tzinfo=EAST)
    async with engine.runtime.db.write() as uow:
        entered = await enter(uow.session, version=version, contact_id=cid, now=now)
        assert entered is not None
        rid = entered
    async with engine.runtime.db.write() as uow:
        await write_batch(
            uow.session,
            [
                {
                    "run_id": rid,
                    "seq": seq,
                    "node_id": "e",
                    "kind": "send_email",
                    "decision": f'it\'s "{seq}"\nnext',
                    "output": {"seq": seq, "nested": CONTEXT},
                }
                for seq in (1, 2)
            ],
            [
                {
                    "workspace_id": ws,
                    "run_id": rid,
                    "contact_id": cid,
                    "node_id": "e",
                    "channel": "email",
                    "idempotency_key": f"k-{rid}",
                    "payload": {"to": ["a@x.test"], "subject": "Ünïcode ✓"},
                    "next_attempt_at": wake,
                }
            ],
            [
                {
                    "rid": rid,
                    "status": "active",
                    "current_node": "e",
                    "wake_at": wake,
                    "context": CONTEXT,
                    "waiting_event": None,
                    "woken_by": "paid",
                    "step_count": 2,
                    "failures": 1,
                    "last_error": "ValueError: 'x'\nline two",
                    "ended_at": None,
                    "exit_reason": None,
                }
            ],
            now,
        )
    async with engine.runtime.db.read() as s:
        steps = list(await s.scalars(select(Step).where(Step.run_id == rid).order_by(Step.seq)))
        [effect] = await s.scalars(select(OutboxEffect).where(OutboxEffect.run_id == rid))
        stored = await s.get(Run, rid)
    assert [(st.seq, st.decision, st.output, st.at) for st in steps] == [
        (seq, f'it\'s "{seq}"\nnext', {"seq": seq, "nested": CONTEXT}, now) for seq in (1, 2)
    ]
    assert (effect.payload, effect.next_attempt_at, effect.created_at) == (
        {"to": ["a@x.test"], "subject": "Ünïcode ✓"},
        wake,
        now,
    )
    assert (effect.status, effect.attempts, effect.idempotency_key) == ("pending", 0, f"k-{rid}")
    assert stored is not None
    assert (stored.wake_at, stored.context, stored.woken_by, stored.waiting_event) == (
        wake,
        CONTEXT,
        "paid",
        None,
    )
    assert (stored.step_count, stored.failures, stored.ended_at) == (2, 1, None)
    assert stored.last_error == "ValueError: 'x'\nline two"
    assert (stored.lease_owner, stored.updated_at) == (None, now)
