"""Funnel mail over pooled SMTP connections: a send slot puts its next message on the wire while
its previous outcome commits, and the server receives it only after that commit (at most one
delivered, unrecorded message per slot); a message whose lease ran out meanwhile is given up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.engines.funnels.outbox.channel import ChannelSender
from app.engines.funnels.outbox.records.outcomes import record as record_outcomes
from app.engines.funnels.outbox.work import deliver
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import EmailChannel
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.engines.funnels.outbox.work.outcomes import DeliveryResult, Outcome
from app.engines.funnels.runs.due.entry import enter
from app.integrations.mail import SmtpPool
from app.settings import FunnelSettings, MailSettings
from tests.engines.funnels.factories import Engine, Space, contact, email_node, graph, published


async def _two_messages_due(engine: Engine, space: Space) -> None:
    rt = engine.runtime
    _, version = await published(rt, space.workspace_id, graph(email_node("hello", subject="Hi")))
    ids = [await contact(rt, space.workspace_id, f"slot{i}@x.test") for i in range(2)]
    async with rt.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=rt.clock.now())
    await engine.runner.run_batch(owner="runner", now=rt.clock.now())


def _pooled_deliverer(engine: Engine) -> tuple[Deliverer, SmtpPool]:
    rt = engine.runtime
    mail = MailSettings(
        smtp_host=engine.sink.host,
        smtp_port=engine.sink.port,
        from_address="funnels@test.example",
        timeout_seconds=5,
    )
    pool = SmtpPool(mail, 1)
    signing = WorkspaceTracking(rt.db, rt.secrets, rt.settings.web.public_url, rt.clock)
    email: ChannelSender = EmailChannel(pool, signing=signing)
    settings = FunnelSettings(lease_seconds=60)
    return Deliverer(rt.db, settings, lambda c: email if c == "email" else None, in_flight=1), pool


def _hold_commits(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """The deliverer's commits wait for the second event; the first is set when one starts."""
    started, may_commit = asyncio.Event(), asyncio.Event()

    async def held_commit(db: Any, settings: Any, group: list[Outcome], *rest: Any) -> None:
        started.set()
        await may_commit.wait()
        await record_outcomes(db, settings, group, *rest)

    monkeypatch.setattr(deliver, "record_outcomes", held_commit)
    return started, may_commit


async def _first_commit_held(
    engine: Engine, space: Space, monkeypatch: pytest.MonkeyPatch
) -> tuple[asyncio.Task[DeliveryResult], asyncio.Event, SmtpPool]:
    """A batch of two messages over one pooled connection, delivering, its first commit held
    until the returned event is set."""
    await _two_messages_due(engine, space)
    deliverer, pool = _pooled_deliverer(engine)
    first_commit, may_commit = _hold_commits(monkeypatch)
    batch = asyncio.create_task(deliverer.run_batch(owner="d", now=engine.runtime.clock.now))
    await first_commit.wait()
    return batch, may_commit, pool


async def test_the_next_message_reaches_the_server_only_after_the_previous_commit(
    engine: Engine, space: Space, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch, may_commit, pool = await _first_commit_held(engine, space, monkeypatch)
    await asyncio.sleep(0.3)  # time enough for the second message to arrive, were it delivered
    assert len(engine.sink.snapshot()) == 1
    may_commit.set()
    result = await batch
    assert result.sent == 2
    assert len(set(engine.sink.count_by_message_id())) == 2
    await pool.aclose()


async def test_a_prepared_message_whose_lease_ran_out_meanwhile_is_given_up(
    engine: Engine, space: Space, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch, may_commit, pool = await _first_commit_held(engine, space, monkeypatch)
    engine.clock.advance(seconds=121)  # the batch's lease (120 s) runs out during the commit
    may_commit.set()
    result = await batch
    assert (result.sent, result.skipped) == (1, 1)
    await asyncio.sleep(0.3)
    assert len(engine.sink.snapshot()) == 1  # the prepared message was never delivered
    await pool.aclose()
