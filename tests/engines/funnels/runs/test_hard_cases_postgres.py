"""Hard cases 3, 4 and 7 with real concurrency on PostgreSQL: several worker tasks, concurrent
trigger tasks, and worker processes, one of them killed with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select

from app.clock import SystemClock
from app.engines.funnels.contacts.events import record_event
from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import (
    OUTBOX_PENDING,
    OUTBOX_SENT,
    RUN_ACTIVE,
    RUN_COMPLETED,
    DeliveryEvent,
    FunnelVersion,
    OutboxEffect,
    Run,
    Step,
)
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.work.runner import Runner
from app.runtime import Runtime
from app.settings import FunnelSettings
from tests.conftest import eventually
from tests.engines.funnels.factories import (
    Engine,
    Space,
    bulk_contacts,
    contact,
    email_node,
    graph,
    node,
    published,
    republish,
)

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[4]


async def _bulk_runs(
    runtime: Runtime, version: FunnelVersion, contact_ids: list[int], node_id: str
) -> None:
    now = runtime.clock.now()
    rows = [
        {
            "workspace_id": version.workspace_id,
            "funnel_id": version.funnel_id,
            "version_id": version.id,
            "contact_id": cid,
            "reentry": False,
            "status": RUN_ACTIVE,
            "current_node": node_id,
            "wake_at": now,
            "context": {},
            "step_count": 0,
            "failures": 0,
            "entered_at": now,
            "updated_at": now,
        }
        for cid in contact_ids
    ]
    async with runtime.db.write() as uow:
        await uow.session.execute(insert(Run), rows)


async def _leases_ran_out(runtime: Runtime) -> bool:
    """Whether every pending effect is due again by the wall clock the worker processes read (a
    leased effect's due time is its lease's expiry)."""
    async with runtime.db.read() as s:
        latest = await s.scalar(
            select(func.max(OutboxEffect.next_attempt_at)).where(
                OutboxEffect.status == OUTBOX_PENDING
            )
        )
    return latest is None or latest <= SystemClock().now()


async def _drain(
    runner: Runner, owner: str, runtime: Runtime, busy: asyncio.Event | None = None
) -> int:
    """Run batches until none is left; ``busy`` is set once a batch has run."""
    steps = 0
    while True:
        result = await runner.run_batch(owner=owner, now=runtime.clock.now())
        steps += result.steps
        if busy is not None and result.leased:
            busy.set()
        if result.leased == 0:
            return steps


async def test_case3_republish_with_10000_runs_in_flight_and_four_workers(
    engine: Engine, space: Space
) -> None:
    """Hard case 3 on PostgreSQL: 10,000 runs in flight while four workers execute them and the
    funnel is republished; every run walks its own version to the end."""
    rt = engine.runtime
    ws = space.workspace_id
    v1 = graph(node("wait", "w", days=1, next="v1_end"), node("join", "v1_end"))
    funnel_id, version1 = await published(rt, ws, v1)
    old = await bulk_contacts(rt, ws, 10_000, "old")
    await _bulk_runs(rt, version1, old, "w")
    runner = Runner(
        rt.db,
        FunnelSettings(runner_batch=500, lease_seconds=60),
        mail_domain="x",
        executors=EXECUTORS,
    )
    busy = asyncio.Event()
    workers = [asyncio.create_task(_drain(runner, f"w{i}", rt, busy)) for i in range(4)]
    await busy.wait()  # republish while the workers are busy with the old runs
    v2 = graph(node("wait", "w", days=1, next="v2_end"), node("join", "v2_end"))
    version2 = await republish(rt, ws, funnel_id, v2)
    new = await bulk_contacts(rt, ws, 100, "new")
    async with rt.db.write() as uow:
        for cid in new:
            await enter(uow.session, version=version2, contact_id=cid, now=rt.clock.now())
    await asyncio.gather(*workers)
    # The workers may have run dry before the new entrants were written: start their waits on
    # the same day as everyone else's, whatever the timing.
    await asyncio.gather(*(_drain(runner, f"w{i}", rt) for i in range(4)))
    engine.clock.advance(days=1)
    await asyncio.gather(*(_drain(runner, f"w{i}", rt) for i in range(4)))
    async with rt.db.read() as s:
        walked = dict(
            (
                await s.execute(
                    select(Step.node_id, func.count())
                    .where(Step.node_id.in_(["v1_end", "v2_end"]))
                    .group_by(Step.node_id)
                )
            ).all()
        )
        by_version = dict(
            (await s.execute(select(Run.version_id, func.count()).group_by(Run.version_id))).all()
        )
        statuses = set(await s.scalars(select(Run.status).distinct()))
        steps = await s.scalar(select(func.count()).select_from(Step))
    assert walked == {"v1_end": 10_000, "v2_end": 100}
    assert by_version == {version1.id: 10_000, version2.id: 100}
    assert statuses == {RUN_COMPLETED}
    # wait (starts), wait (over), the end marker: each node once per run, nothing twice
    assert steps == 3 * 10_100


async def test_case4_same_trigger_from_20_tasks_is_one_run(engine: Engine, space: Space) -> None:
    """Hard case 4 on PostgreSQL: 20 tasks fire the same trigger at once → one run."""
    rt = engine.runtime
    ws = space.workspace_id
    funnel_id, version = await published(
        rt,
        ws,
        graph(node("wait", "w", days=1), triggers=[{"kind": "api_event", "event": "signup"}]),
    )
    cid = await contact(rt, ws, "a@x.test")
    barrier = asyncio.Barrier(20)

    async def fire(i: int) -> int | None:
        async with rt.db.write() as uow:
            await barrier.wait()
            return await enter(uow.session, version=version, contact_id=cid, now=rt.clock.now())

    created = [r for r in await asyncio.gather(*(fire(i) for i in range(20))) if r is not None]
    assert len(created) == 1

    # The same through the event path: 20 events, 20 concurrent matchers.
    other = await contact(rt, ws, "b@x.test")
    async with rt.db.write() as uow:
        for i in range(20):
            await record_event(
                uow.session,
                workspace_id=ws,
                contact_id=other,
                name="signup",
                source="api",
                external_id=f"evt-{i}",
                now=rt.clock.now(),
            )
    results = await asyncio.gather(
        *(
            match_events(rt.db, now=rt.clock.now(), limit=1, segments=evaluate_segments)
            for _ in range(20)
        )
    )
    assert sum(events for events, _ in results) == 20
    assert sum(started for _, started in results) == 1
    async with rt.db.read() as s:
        n = await s.scalar(select(func.count()).select_from(Run).where(Run.funnel_id == funnel_id))
    assert n == 2


def _worker(database_url: str, smtp_port: int, lease: int, *, die: bool) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-m",
        "tests.engines.funnels.runs.worker_process",
        database_url,
        str(smtp_port),
        str(lease),
    ]
    if die:
        args.append("--die-on-advance")
    return subprocess.Popen(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


async def test_case7_sigkilled_worker_process_every_message_exactly_once(
    engine: Engine, space: Space, database_url: str
) -> None:
    """Hard case 7 on PostgreSQL: a worker process is SIGKILLed after writing the effects of its
    first batch and before committing the advancement. Two fresh worker processes take over
    after the lease expires; a real SMTP server (aiosmtpd) counts what arrives: every expected
    message exactly once."""
    rt = engine.runtime
    ws = space.workspace_id
    funnel_id, version = await published(
        rt,
        ws,
        graph(email_node("one", subject="one", next="two"), email_node("two", subject="two")),
    )
    ids = await bulk_contacts(rt, ws, 40, "k")
    async with rt.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=rt.clock.now())

    doomed = _worker(database_url, engine.sink.port, 3, die=True)
    assert await asyncio.to_thread(doomed.wait, 60) == -9
    async with rt.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(OutboxEffect)) == 0
        leased = await s.scalar(
            select(func.count()).select_from(Run).where(Run.lease_owner.is_not(None))
        )
    assert leased == 10  # the dead worker's batch, waiting for its lease to expire

    survivors = [_worker(database_url, engine.sink.port, 3, die=False) for _ in range(2)]
    for proc in survivors:
        assert await asyncio.to_thread(proc.wait, 120) == 0

    counts = engine.sink.count_by_message_id()
    assert len(counts) == 80
    assert set(counts.values()) == {1}
    async with rt.db.read() as s:
        sent = await s.scalar(
            select(func.count()).select_from(OutboxEffect).where(OutboxEffect.status == OUTBOX_SENT)
        )
        done = await s.scalar(
            select(func.count())
            .select_from(Run)
            .where(Run.funnel_id == funnel_id, Run.status == RUN_COMPLETED)
        )
    assert (sent, done) == (80, 40)


async def test_case7_deliverer_sigkilled_mid_batch_loses_nothing_and_repeats_only_message_ids(
    engine: Engine, space: Space, database_url: str
) -> None:
    """Hard case 7 for the deliverer (FN-7, FN-9): a worker process delivering with several
    messages in flight over persistent SMTP connections is SIGKILLed while mail is arriving.
    Two fresh processes take over after its leases expire. At the SMTP server (aiosmtpd) every
    message arrives, none under a second Message-ID, and a message arrives twice only if the
    dead process had it on the wire — within its last leased batch (the accept-then-record
    window, RFC 1047); every effect ends recorded sent exactly once."""
    rt = engine.runtime
    ws = space.workspace_id
    _, version = await published(rt, ws, graph(email_node("one", subject="one")))
    ids = await bulk_contacts(rt, ws, 300, "dk")
    async with rt.db.write() as uow:
        for cid in ids:
            await enter(uow.session, version=version, contact_id=cid, now=rt.clock.now())
    assert await _drain(engine.runner, "runner", rt) == 300
    engine.sink.reset()

    doomed = _worker(database_url, engine.sink.port, 3, die=False)

    async def mail_arriving() -> bool:
        assert doomed.poll() is None, "the worker finished before it could be killed"
        return len(engine.sink.snapshot()) >= 100

    try:
        await eventually(mail_arriving, timeout=60, interval=0.005)
        doomed.kill()
        assert await asyncio.to_thread(doomed.wait, 30) == -9
    finally:
        if doomed.poll() is None:
            doomed.kill()
    arrived_before = len(engine.sink.snapshot())
    assert arrived_before < 300, "killed mid-delivery"
    await eventually(lambda: _leases_ran_out(rt), timeout=30)

    survivors = [_worker(database_url, engine.sink.port, 3, die=False) for _ in range(2)]
    for proc in survivors:
        assert await asyncio.to_thread(proc.wait, 120) == 0

    counts = engine.sink.count_by_message_id()
    assert len(counts) == 300  # nothing lost, nothing under a new Message-ID
    repeats = sum(counts.values()) - 300
    assert repeats <= 10  # at most the dead process's leased batch (deliver_batch=10)
    async with rt.db.read() as s:
        statuses = dict(
            (
                await s.execute(
                    select(OutboxEffect.status, func.count()).group_by(OutboxEffect.status)
                )
            ).all()
        )
        sent_events = await s.scalar(
            select(func.count()).select_from(DeliveryEvent).where(DeliveryEvent.kind == "sent")
        )
    assert statuses == {OUTBOX_SENT: 300}
    assert sent_events == 300
