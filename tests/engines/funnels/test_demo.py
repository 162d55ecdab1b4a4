"""The demo: contacts and a welcome funnel (a wait, a condition and a goal) seeded as a draft; once
a person publishes it and enrols the contacts, its mail reaches the local SMTP sink."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from app.demo.funnels import PART
from app.demo.parts import DemoWorkspace
from app.engines.funnels.definitions.service import list_funnels, publish
from app.engines.funnels.events.claim.triggers import enroll
from app.engines.funnels.models import RUN_COMPLETED, Contact
from app.sandbox.smtp import SmtpSink
from tests.engines.funnels.factories import Engine, Space, runs_of


async def test_demo_welcome_funnel_sends_to_the_local_sink(engine: Engine, space: Space) -> None:
    started = PART.sandboxes["smtp"]()
    assert isinstance(started, SmtpSink)
    started.stop()
    engine.clock.set(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))  # 05:00 in New York: quiet hours
    await PART.seed(
        engine.runtime,
        DemoWorkspace(
            organisation_id=0, workspace_id=space.workspace_id, admin_user_id=0, sandbox_urls={}
        ),
    )
    async with engine.runtime.db.read() as s:
        [funnel] = await list_funnels(s, space.workspace_id)
        contact_ids = list(
            await s.scalars(select(Contact.id).where(Contact.workspace_id == space.workspace_id))
        )
    await engine.drive()
    assert engine.sink.messages == []  # a draft mails nobody
    async with engine.runtime.db.write() as uow:
        version = await publish(
            uow.session, space.workspace_id, funnel.id, user_id=None, now=engine.clock.now()
        )
        await enroll(uow.session, version, now=engine.clock.now(), contact_ids=contact_ids)
    await engine.drive()
    assert sorted(m.subject for m in engine.sink.messages) == [
        "Welcome, Ada!",
        "Welcome, Alan!",
        "Welcome, Emmy!",
    ]
    await engine.advance(hours=3)  # 08:00 in New York
    assert len([m for m in engine.sink.messages if m.subject.startswith("Welcome")]) == 5
    await engine.advance(days=3)
    runs = await runs_of(engine.runtime, funnel.id)
    assert len(runs) == 5
    assert {r.status for r in runs} == {RUN_COMPLETED}
    nudges = [m for m in engine.sink.messages if "little something" in m.subject]
    assert len(nudges) == 5
