"""Meta's throttling honoured (spec §7): when a throttled Graph call's usage headers carry
``estimated_time_to_regain_access``, the next attempt waits that long (bounded) instead of the
fixed 1 s / 2 s schedule; a longer throttle stops calling and puts the account's run back on the
queue for when access returns. Against the Graph simulator's throttling fault, on a ManualClock."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import Batch
from app.engines.adrules.payloads import RunAccountPayload
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import LogOnly, MetricValueCondition, TaskIn
from app.engines.adrules.work.account import queue_defer, run_account_job
from app.integrations.meta.client import GraphClient
from app.integrations.meta.errors import MetaError
from app.integrations.meta.retry import next_wait
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.models import Job
from app.scheduling.queue import DatabaseQueue
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    TEST_JOB,
    TOKEN,
    Clients,
    Workspace,
    create_account,
    create_rule,
    create_setup,
    dispatch_deps,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
    store_token,
)
from tests.harness.clock import manual_clock
from tests.harness.sleep import RecordingSleep

SPEND_TASK = TaskIn(
    name="Spend watch",
    conditions=[
        MetricValueCondition(metric="spend", period="today", operator="gte", value=Decimal("0"))
    ],
    action=LogOnly(),
    cooldown="15m",
)


@pytest.fixture
async def sim(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


class Deferrals:
    """A Defer that keeps what it was asked to queue."""

    def __init__(self) -> None:
        self.calls: list[tuple[RunAccountPayload, Any]] = []

    async def __call__(self, uow: Any, payload: RunAccountPayload, at: Any) -> None:
        self.calls.append((payload, at))


def _deps(runtime: Runtime, clients: Clients, **changes: Any) -> tuple[AdRulesDeps, RecordingSleep]:
    sleep = RecordingSleep()
    return dataclasses.replace(make_deps(runtime, clients), sleep=sleep, **changes), sleep


async def _records(runtime: Runtime, batch_id: str) -> list[ExecutionRecord]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord).where(ExecutionRecord.batch_id == batch_id)
        )
        return list(rows.all())


async def _batch(runtime: Runtime, record_id: int) -> Batch:
    async with runtime.db.read() as session:
        batch = await session.get(Batch, record_id)
    assert batch is not None
    return batch


def test_the_wait_is_meta_estimate_when_longer_and_bounded() -> None:
    throttled = MetaError("too many calls", code=80004, transient=True, retry_after_seconds=60)
    plain = MetaError("service error", code=2, transient=True)
    assert next_wait(plain, 1.0, 60.0) == 1.0
    assert next_wait(throttled, 1.0, 60.0) == 60.0
    assert next_wait(throttled, 120.0, 60.0) == 120.0  # the schedule's wait is already longer
    assert next_wait(throttled, 1.0, 30.0) is None  # beyond the bound: stop, come back later


async def test_dispatch_fetch_waits_meta_estimate_instead_of_one_second(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    world.add_account("act_1", "Shop")
    world.add_campaigns("act_1", 3)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id, TOKEN)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=[account.id])
    world.throttle("campaigns.list", minutes=1)
    sleep = RecordingSleep()

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )

    assert sleep.waits == [60.0]  # Meta's estimate, not the schedule's 1 s
    assert summary.jobs == 1
    assert world.count("campaigns.list") == 2


async def test_dispatch_fetch_does_not_hammer_a_long_throttle(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    world.add_account("act_1", "Shop")
    world.add_campaigns("act_1", 3)
    world.grant(TOKEN, "act_1")
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id, TOKEN)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=[account.id])
    world.throttle("campaigns.list", minutes=10, times=-1)
    sleep = RecordingSleep()

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )

    # One refused call, no 1 s / 2 s retries: the account is skipped for this tick.
    assert (summary.jobs, summary.skipped_accounts) == (0, 1)
    assert sleep.waits == []
    assert world.count("campaigns.list") == 1


@pytest.mark.parametrize("kind", ["batch", "insights"])
async def test_worker_waits_meta_estimate_for_a_throttled_call_or_item(
    kind: str, runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    """``batch``: the whole batch call is throttled; ``insights``: one sub-request is, with the
    usage headers inside its batch item."""
    world, clients = sim
    world.add_campaigns("act_1001", 4)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[SPEND_TASK])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    world.throttle(kind, minutes=1)
    deps, sleep = _deps(runtime, clients)

    status = await run_account_job(deps, payload)

    assert status == "completed"
    assert sleep.waits == [60.0]
    assert {r.status for r in await _records(runtime, payload.batch_id)} == {"executed"}
    assert world.count("batch") == 2


async def test_worker_defers_the_run_for_a_long_throttle_and_resumes_it(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 4)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[SPEND_TASK])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    world.throttle("batch", minutes=10, times=-1)
    deferrals = Deferrals()
    deps, sleep = _deps(runtime, clients, defer=deferrals)
    now = runtime.clock.now()

    status = await run_account_job(deps, payload)

    # One refused call, then the run goes back on the queue for when Meta expects access back.
    assert status == "queued"
    assert world.count("batch") == 1
    assert sleep.waits == []
    ((again, at),) = deferrals.calls
    assert at == now + timedelta(minutes=10)
    assert again.deferrals == 1
    assert again.entities == payload.entities
    assert await _records(runtime, payload.batch_id) == []
    batch = await _batch(runtime, payload.batch_record_id)
    assert batch.status == "queued"
    assert batch.error is not None
    assert "throttled" in batch.error
    assert JOB_TOKEN not in batch.error

    # Access is back when Meta said: the resumed run completes.
    world.state.clear_faults()
    manual_clock(runtime).set(at)
    assert await run_account_job(deps, again) == "completed"
    assert len(await _records(runtime, payload.batch_id)) == 4
    batch = await _batch(runtime, payload.batch_record_id)
    assert (batch.status, batch.error, batch.executed) == ("completed", None, 4)


async def test_a_deferred_run_is_a_queued_job_with_run_at(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 2)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[SPEND_TASK])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    world.throttle("batch", minutes=5, times=-1)
    queue = DatabaseQueue(runtime.db, runtime.clock)
    deps, _ = _deps(runtime, clients, defer=queue_defer(queue, TEST_JOB))

    assert await run_account_job(deps, payload) == "queued"

    async with runtime.db.read() as session:
        (job,) = (await session.scalars(select(Job).where(Job.name == TEST_JOB.name))).all()
    assert job.status == "queued"
    assert job.run_at == runtime.clock.now() + timedelta(minutes=5)
    assert msgspec.json.decode(job.payload, type=RunAccountPayload).deferrals == 1


async def test_after_the_last_deferral_unread_campaigns_are_recorded_as_errors(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim
    world.add_campaigns("act_1001", 3)
    setup = await create_setup(runtime, ws.workspace_id, tasks=[SPEND_TASK])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    world.throttle("batch", minutes=10, times=-1)
    deferrals = Deferrals()
    deps, _ = _deps(runtime, clients, defer=deferrals, max_deferrals=2)

    status = await run_account_job(deps, msgspec.structs.replace(payload, deferrals=2))

    assert status == "failed"
    assert deferrals.calls == []
    records = await _records(runtime, payload.batch_id)
    assert [r.status for r in records] == ["error"] * 3
    assert all("too many calls" in (r.reason or "").lower() for r in records)
