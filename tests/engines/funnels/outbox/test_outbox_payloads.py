"""The typed outbox (issue 12 item 3): an effect's payload is its channel's msgspec struct, tagged
``<channel>/<version>``. A row stored before the tag existed — written raw here, in the JSON the
runner wrote until now — is delivered as it was; a row that does not decode fails once with the
reason recorded, and the deliverer carries on with the others (no crash, no retry loop)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select

from app.engines.funnels.models import (
    OUTBOX_FAILED,
    OUTBOX_SENT,
    DeliveryEvent,
    OutboxEffect,
)
from app.engines.funnels.outbox import payloads
from app.engines.funnels.runs.due.entry import enter
from tests.engines.funnels.factories import (
    Engine,
    Space,
    contact,
    effects,
    email_node,
    graph,
    published,
)

TODAYS_EMAIL: dict[str, Any] = {
    # Exactly what run_send_email stored before payloads were typed: no "format" tag.
    "to": ["old@x.test"],
    "subject": "Stored before the upgrade",
    "text": "Hello from an older deployment",
    "html": None,
    "message_id": "<run-0-step-1.w0@test.example>",
    "topic": "marketing",
    "when_capped": "wait",
}


async def _insert_raw(
    engine: Engine, ws: int, cid: int, key: str, channel: str, payload: Any
) -> int:
    """An outbox row as an older deployment left it: inserted by SQL, not by the runner."""
    now = engine.clock.now()
    async with engine.runtime.db.write() as uow:
        result = await uow.session.execute(
            insert(OutboxEffect.__table__)  # type: ignore[arg-type]
            .values(
                workspace_id=ws,
                run_id=None,
                contact_id=cid,
                node_id="n",
                channel=channel,
                idempotency_key=key,
                payload=payload,
                status="pending",
                attempts=0,
                next_attempt_at=now,
                created_at=now,
            )
            .returning(OutboxEffect.__table__.c.id)
        )
        return int(result.scalar_one())


async def _effect(engine: Engine, effect_id: int) -> OutboxEffect:
    async with engine.runtime.db.read() as s:
        found = await s.get(OutboxEffect, effect_id)
    assert found is not None
    return found


async def _delivery_kinds(engine: Engine, effect_id: int) -> list[tuple[str, str]]:
    async with engine.runtime.db.read() as s:
        rows = await s.execute(
            select(DeliveryEvent.kind, DeliveryEvent.detail)
            .where(DeliveryEvent.outbox_id == effect_id)
            .order_by(DeliveryEvent.id)
        )
    return [(kind, detail) for kind, detail in rows.all()]


async def test_a_row_in_todays_format_is_delivered(engine: Engine, space: Space) -> None:
    ws = space.workspace_id
    cid = await contact(engine.runtime, ws, "old@x.test")
    effect_id = await _insert_raw(engine, ws, cid, "old-1", "email", TODAYS_EMAIL)

    result = await engine.deliverer.run_batch(owner="d", now=engine.clock.now)

    assert (result.leased, result.sent) == (1, 1)
    assert (await _effect(engine, effect_id)).status == OUTBOX_SENT
    [message] = engine.sink.messages
    assert message.subject == "Stored before the upgrade"
    assert message.message_id == TODAYS_EMAIL["message_id"]
    assert message.to == ["old@x.test"]
    # Read as marketing mail of its topic, as before: it carries its unsubscribe links.
    assert "List-Unsubscribe" in message.headers
    assert "Hello from an older deployment" in message.body


async def test_the_runner_stores_the_tagged_struct_and_it_decodes_back(
    engine: Engine, space: Space
) -> None:
    rt = engine.runtime
    ws = space.workspace_id
    _, version = await published(rt, ws, graph(email_node("hello", subject="Tagged")))
    cid = await contact(rt, ws, "new@x.test")
    async with rt.db.write() as uow:
        await enter(uow.session, version=version, contact_id=cid, now=rt.clock.now())
    await engine.runner.run_batch(owner="r", now=rt.clock.now())

    [row] = await effects(rt)
    assert row.payload["format"] == "email/1"
    decoded = payloads.decode(row.channel, row.payload)
    assert isinstance(decoded, payloads.Email)
    assert (decoded.subject, decoded.to, decoded.topic) == ("Tagged", ["new@x.test"], "marketing")
    await engine.deliverer.run_batch(owner="d", now=engine.clock.now)
    assert [m.subject for m in engine.sink.messages] == ["Tagged"]


async def test_rows_that_do_not_decode_fail_once_with_the_reason(
    engine: Engine, space: Space
) -> None:
    ws = space.workspace_id
    cid = await contact(engine.runtime, ws, "bad@x.test", phone="+15550100")
    missing = {k: v for k, v in TODAYS_EMAIL.items() if k != "subject"}
    bad = {
        "missing": await _insert_raw(engine, ws, cid, "bad-1", "email", missing),
        "mistyped": await _insert_raw(engine, ws, cid, "bad-2", "sms", {"to": 5, "text": "x"}),
        "unknown": await _insert_raw(engine, ws, cid, "bad-3", "fax", {"to": "x"}),
        "mismatched": await _insert_raw(
            engine, ws, cid, "bad-4", "sms", {**TODAYS_EMAIL, "format": "email/1"}
        ),
    }
    good = await _insert_raw(engine, ws, cid, "good-1", "email", TODAYS_EMAIL)

    result = await engine.deliverer.run_batch(owner="d", now=engine.clock.now)

    assert (result.leased, result.sent, result.failed) == (5, 1, 4)
    assert (await _effect(engine, good)).status == OUTBOX_SENT
    reasons = {}
    for name, effect_id in bad.items():
        effect = await _effect(engine, effect_id)
        assert effect.status == OUTBOX_FAILED
        assert (effect.last_error or "").startswith("unreadable payload: ")
        [(kind, detail)] = await _delivery_kinds(engine, effect_id)
        assert kind == "failed"
        reasons[name] = detail
    assert "missing required field `subject`" in reasons["missing"]
    assert "Expected `str`, got `int`" in reasons["mistyped"]
    assert "fax/1" in reasons["unknown"]
    assert "'email/1' payload on the sms channel" in reasons["mismatched"]
    # Recorded once: nothing is due again, however long the deliverer keeps going.
    engine.clock.advance(days=1)
    again = await engine.deliverer.run_batch(owner="d", now=engine.clock.now)
    assert again.leased == 0
    assert len(engine.sink.messages) == 1
