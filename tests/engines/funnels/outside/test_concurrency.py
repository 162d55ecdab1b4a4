"""Several deliverers at once: every outside effect reaches its provider exactly once (FN-7)."""

from __future__ import annotations

import asyncio

from app.engines.funnels.models import OUTBOX_SENT
from tests.engines.funnels.factories import Space, contact, effects, graph, node, published
from tests.engines.funnels.outside.conftest import Outside


async def test_concurrent_deliverers_send_each_sms_once(outside: Outside, space: Space) -> None:
    """Four deliverer tasks drain 40 SMS effects side by side: 40 messages at the provider, no
    duplicate, every row sent once."""
    ws = space.workspace_id
    sms = outside.sms()
    await outside.provider(ws, "sms", shape="json", secret="sms-sandbox-key")
    await published(
        outside.runtime,
        ws,
        graph(
            node("send_sms", "t", text="Hello {{email}}"), triggers=[{"kind": "contact_created"}]
        ),
    )
    for i in range(40):
        await contact(outside.runtime, ws, f"p{i}@example.com", phone=f"+49151000000{i:02d}")
    await outside.drive(deliver=False)

    async def drain(owner: str) -> int:
        sent = 0
        while True:
            result = await outside.deliverer.run_batch(owner=owner, now=outside.clock.now, limit=5)
            sent += result.sent
            if result.leased == 0:
                return sent

    totals = await asyncio.gather(*(drain(f"deliverer-{n}") for n in range(4)))
    assert sum(totals) == 40
    assert len(sms.messages) == 40
    assert sorted(m["to"] for m in sms.messages.values()) == sorted(
        f"+49151000000{i:02d}" for i in range(40)
    )
    assert {e.status for e in await effects(outside.runtime)} == {OUTBOX_SENT}
