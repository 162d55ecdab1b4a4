"""AR-10 / AR-12a / AR-13: a slow Graph API cannot stretch the 10-second dispatch tick.

Ad accounts hang for real on the loopback Graph simulator (their campaign-list calls are held open);
time is the manual clock, moved on by :func:`drive_tick` only while the sweep waits on held calls
alone, so every outcome below follows from the clock and the pool's rules, not from machine speed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.clock import ManualClock
from app.engines.adrules import stops
from app.engines.adrules.claim.dispatch import DispatchSummary, dispatch_due
from app.engines.adrules.claim.pool import DEFERRED_REASON, FETCH_OUTSTANDING
from app.engines.adrules.models import Batch, Rule
from app.engines.adrules.rule_views import batch_status
from app.integrations.meta.client import GraphClient
from app.integrations.meta.reader import MetaReader
from app.platform.models import Workspace as WorkspaceRow
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.settings import Settings
from tests.conftest import eventually
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    dispatch_deps,
    drive_tick,
    store_token,
)

PER_RULE = 10
HANGING, HEALTHY, LATE = 1000, 9000, 9100
HEALTHY_ID, LATE_ID = f"act_{HEALTHY}", f"act_{LATE}"


@pytest.fixture
async def wide_graph(settings: Settings) -> AsyncIterator[GraphClient]:
    """A Graph client with the process's connection pool (room for every hanging call)."""
    client = GraphClient(
        settings.integrations.meta_graph_url,
        settings.integrations.meta_graph_version,
        max_connections=FETCH_OUTSTANDING + 64,
    )
    yield client
    await client.aclose()


async def _accounts(
    runtime: Runtime, world: GraphWorld, ws: Workspace, first: int, n: int
) -> list[int]:
    ids = []
    for i in range(n):
        meta_id = f"act_{first + i}"
        world.add_account(meta_id, meta_id)
        world.add_campaigns(meta_id, 2)
        world.grant(TOKEN, meta_id)
        ids.append(
            (await create_account(runtime, workspace_id=ws.workspace_id, meta_id=meta_id)).id
        )
    return ids


async def _rule(runtime: Runtime, ws: Workspace, accounts: list[int], due_ago: float) -> int:
    """A rule due ``due_ago`` seconds ago (older first: the claim takes the oldest first)."""
    rule_id = await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=accounts, name=f"R{accounts[0]}"
    )
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Rule)
            .where(Rule.id == rule_id)
            .values(next_execution_at=runtime.clock.now() - timedelta(seconds=due_ago))
        )
    return rule_id


async def _hanging_world(
    runtime: Runtime, world: GraphWorld, ws: Workspace, hanging: int
) -> tuple[list[str], int]:
    """``hanging`` accounts in rules of ten, all due before one healthy account's rule."""
    await store_token(runtime, ws.workspace_id)
    ids = await _accounts(runtime, world, ws, HANGING, hanging)
    for n, start in enumerate(range(0, hanging, PER_RULE)):
        await _rule(runtime, ws, ids[start : start + PER_RULE], due_ago=600 - n)
    meta_ids = [f"act_{HANGING + i}" for i in range(hanging)]
    world.hang_accounts(*meta_ids, seconds=600)
    (healthy,) = await _accounts(runtime, world, ws, HEALTHY, 1)
    healthy_rule = await _rule(runtime, ws, [healthy], due_ago=1)
    return meta_ids, healthy_rule


async def _batches(runtime: Runtime) -> dict[str, Batch]:
    async with runtime.db.read() as session:
        rows = (await session.execute(select(Batch).order_by(Batch.id))).scalars()
        return {b.account_meta_id: b for b in rows}


def _list_calls(world: GraphWorld) -> list[str]:
    """The ad account of every campaign-list call, in the order the simulator received them."""
    return [
        str(details.get("scope")) for kind, details in world.state.log if kind == "campaigns.list"
    ]


@pytest.mark.parametrize("hanging", [40, 200])
async def test_ar10_ar12a_ar13_hanging_accounts_cannot_stretch_the_tick(
    runtime: Runtime,
    clock: ManualClock,
    ws: Workspace,
    world: GraphWorld,
    wide_graph: GraphClient,
    hanging: int,
) -> None:
    """40 or 200 ad accounts hang: the tick ends within its 8.5-second budget on the clock (the
    10-second sweep loses no tick, AR-10), the healthy account — the last one
    submitted — is dispatched in that same tick (AR-13: one slow account delays no other), each
    hanging account is either skipped at its own deadline counted from its first call (AR-12a)
    or deferred with a readable record."""
    hanging_ids, _ = await _hanging_world(runtime, world, ws, hanging)
    deps = dispatch_deps(runtime, graph=wide_graph)
    assert (deps.tick_budget_seconds, deps.fetch_deadline_seconds) == (8.5, 8.0)
    begun, tick = clock.monotonic(), clock.now()

    summary = await drive_tick(deps, world, tick)

    assert deps.tick_budget_seconds is not None
    assert clock.monotonic() - begun <= deps.tick_budget_seconds
    batches = await _batches(runtime)
    healthy = batches[HEALTHY_ID]
    assert (healthy.status, healthy.tick_at) == ("queued", tick)
    assert summary.jobs == 1
    # Every hanging account was reached and has its record: skipped at its deadline, or deferred.
    assert sorted(_list_calls(world)) == sorted([*hanging_ids, HEALTHY_ID])
    statuses = {batches[a].status for a in hanging_ids}
    assert statuses <= {"skipped", "deferred"}
    for account in hanging_ids:
        batch = batches[account]
        if batch.status == "skipped":
            assert "did not arrive within 8 s" in (batch.error or "")
        else:
            assert (batch.error or "").startswith(DEFERRED_REASON)
            assert batch.finished_at is None
    deferred = [a for a in hanging_ids if batches[a].status == "deferred"]
    assert summary.deferred_accounts == len(deferred)
    if hanging == 200:
        # More hang than 16 slots can see out within the budget: the budget ended the tick.
        assert summary.fetch.budget_spent
        assert deferred
        assert clock.monotonic() - begun == deps.tick_budget_seconds


async def test_ar10_ar12a_deferred_accounts_are_fetched_first_next_tick(
    runtime: Runtime,
    clock: ManualClock,
    ws: Workspace,
    world: GraphWorld,
    wide_graph: GraphClient,
) -> None:
    """The accounts one tick deferred are the next tick's first calls, before a rule newly due
    (no account starved by others hanging every tick); each is settled on its own record and
    batch id; the newly due healthy account is still dispatched in its own tick."""
    hanging_ids, _ = await _hanging_world(runtime, world, ws, 200)
    deps = dispatch_deps(runtime, graph=wide_graph)
    first = clock.now()
    await drive_tick(deps, world, first)
    before = await _batches(runtime)
    deferred = [a for a in hanging_ids if before[a].status == "deferred"]
    assert deferred

    (late,) = await _accounts(runtime, world, ws, LATE, 1)
    await _rule(runtime, ws, [late], due_ago=0)
    clock.set(first + timedelta(seconds=10))
    world.state.reset_counts()
    begun = clock.monotonic()
    summary = await drive_tick(deps, world, clock.now())

    assert deps.tick_budget_seconds is not None
    assert clock.monotonic() - begun <= deps.tick_budget_seconds
    calls = _list_calls(world)
    # Every deferred account first, then the rule newly due.
    assert sorted(calls[: len(deferred)]) == sorted(deferred)
    assert calls[len(deferred) :] == [LATE_ID]
    assert summary.resumed_accounts == len(deferred)
    after = await _batches(runtime)
    assert after[LATE_ID].status == "queued"
    # Each deferred account had only the rest of its 8-s deadline (AR-12a: the whole fetch),
    # so most are settled now instead of being deferred again.
    again = [a for a in deferred if after[a].status == "deferred"]
    assert len(again) < len(deferred) // 2
    assert all(after[a].fetch_waited_ms <= 8000 for a in again)
    for account in deferred:
        # Settled in place: the same record and batch id, the tick that dispatched the rule.
        assert after[account].id == before[account].id
        assert after[account].batch_id == before[account].batch_id
        assert after[account].tick_at == first
        assert after[account].status in {"skipped", "deferred"}


async def test_ar12a_a_deferred_account_that_answers_is_queued_on_its_first_tick_key(
    runtime: Runtime,
    clock: ManualClock,
    ws: Workspace,
    world: GraphWorld,
    wide_graph: GraphClient,
) -> None:
    """A deferred account whose Graph calls answer again is queued next tick from the same
    record, its job keyed by the first tick (a re-run of either tick queues nothing new)."""
    hanging_ids, _ = await _hanging_world(runtime, world, ws, 200)
    deps = dispatch_deps(runtime, graph=wide_graph)
    first = clock.now()
    await drive_tick(deps, world, first)
    before = await _batches(runtime)
    deferred = [a for a in hanging_ids if before[a].status == "deferred"]
    world.clear_faults()  # Meta recovers
    clock.set(first + timedelta(seconds=10))

    summary = await drive_tick(deps, world, clock.now())

    after = await _batches(runtime)
    assert summary.jobs == len(deferred)
    assert all(after[a].status == "queued" and after[a].error is None for a in deferred)
    assert all(after[a].batch_id == before[a].batch_id for a in deferred)
    # A third tick finds nothing deferred and fetches nothing.
    world.state.reset_counts()
    clock.set(first + timedelta(seconds=20))
    summary = await drive_tick(deps, world, clock.now())
    assert (summary.jobs, summary.resumed_accounts, world.count("campaigns.list")) == (0, 0, 0)


async def test_ar10_a_paused_rule_s_deferred_accounts_are_recorded_not_fetched(
    runtime: Runtime,
    clock: ManualClock,
    ws: Workspace,
    world: GraphWorld,
    wide_graph: GraphClient,
) -> None:
    hanging_ids, _ = await _hanging_world(runtime, world, ws, 200)
    deps = dispatch_deps(runtime, graph=wide_graph)
    first = clock.now()
    await drive_tick(deps, world, first)
    async with runtime.db.write() as uow:
        await uow.session.execute(update(Rule).values(status="paused"))
    world.state.reset_counts()
    clock.set(first + timedelta(seconds=10))

    await drive_tick(deps, world, clock.now())

    assert world.count("campaigns.list") == 0
    after = await _batches(runtime)
    assert not [a for a in hanging_ids if after[a].status == "deferred"]
    assert any("paused or archived" in (after[a].error or "") for a in hanging_ids)


def test_ar10_the_default_budget_ends_a_10_second_tick_within_10_seconds() -> None:
    settings = Settings()
    assert settings.adrules.tick_budget_seconds < 10
    assert settings.adrules.fetch_deadline_seconds <= settings.adrules.tick_budget_seconds
    with pytest.raises(Exception, match="ADRULES_TICK_BUDGET_SECONDS"):
        dataclasses.replace(settings.adrules, tick_budget_seconds=0)


async def test_ar23_ar23b_deferred_accounts_stay_frozen_by_the_stops(
    runtime: Runtime,
    clock: ManualClock,
    ws: Workspace,
    world: GraphWorld,
    wide_graph: GraphClient,
) -> None:
    """The stop stops deferred work too: under the platform stop a tick fetches nothing and the
    deferred records wait; a workspace stop records them skipped with ``platform_stop`` and no
    call goes to Meta."""
    await _hanging_world(runtime, world, ws, 200)
    deps = dispatch_deps(runtime, graph=wide_graph)
    first = clock.now()
    await drive_tick(deps, world, first)
    deferred = [a for a, b in (await _batches(runtime)).items() if b.status == "deferred"]
    assert deferred
    world.state.reset_counts()

    clock.set(first + timedelta(seconds=10))
    stopped = dispatch_deps(runtime, graph=wide_graph, stopped=True)
    summary = await drive_tick(stopped, world, clock.now())
    assert summary.stopped
    assert world.count("campaigns.list") == 0
    assert [a for a, b in (await _batches(runtime)).items() if b.status == "deferred"] == deferred

    async with runtime.db.write() as uow:
        organisation_id = await uow.session.scalar(
            select(WorkspaceRow.organisation_id).where(WorkspaceRow.id == ws.workspace_id)
        )
        assert organisation_id is not None
        await stops.set_stop(
            uow.session,
            organisation_id=organisation_id,
            workspace_id=ws.workspace_id,
            reason="maintenance window",
            stopped_by="admin@example.com",
            now=clock.now(),
        )
    clock.set(first + timedelta(seconds=20))
    await drive_tick(deps, world, clock.now())

    assert world.count("campaigns.list") == 0
    after = await _batches(runtime)
    for account in deferred:
        assert after[account].status == "skipped"
        assert "platform_stop" in (after[account].error or "")
        assert "maintenance window" in (after[account].error or "")


def test_ar25_a_run_with_a_deferred_account_says_so_in_the_rule_list() -> None:
    """The rules list's one word for the last run: a deferred account is still to come, so it
    outranks queued and completed ones (only failures and skips say more)."""
    assert batch_status(["queued", "deferred", "completed"]) == "deferred"
    assert batch_status(["deferred", "skipped"]) == "skipped"


async def test_ar12a_the_simulator_holds_a_hanging_account_s_calls_until_the_client_leaves(
    world: GraphWorld, wide_graph: GraphClient
) -> None:
    """The simulator's documented hang: a named account's campaign listing is held (counted in
    ``held``), another account answers at once, and a held call is let go when its client
    gives up."""
    for meta_id in ("act_1", "act_2"):
        world.add_account(meta_id, meta_id)
        world.add_campaigns(meta_id, 2)
        world.grant(TOKEN, meta_id)
    world.hang_accounts("act_1", seconds=600)
    reader = MetaReader(wide_graph, TOKEN)
    held = asyncio.create_task(reader.campaigns_page("act_1"))

    async def holding() -> bool:
        return world.held == 1

    await eventually(holding)
    page = await reader.campaigns_page("act_2")
    assert len(page.data) == 2
    assert world.held == 1
    assert not held.done()
    held.cancel()

    async def let_go() -> bool:
        return world.held == 0

    await eventually(let_go)


async def test_ar10_a_cancelled_tick_stops_its_hanging_fetches_at_once(
    runtime: Runtime,
    clock: ManualClock,
    ws: Workspace,
    world: GraphWorld,
    wide_graph: GraphClient,
) -> None:
    """A tick cancelled (its lease lost, the process stopping) stops its fetches then and there:
    with the clock standing still, no deadline or budget can end them, yet the sweep ends and
    the simulator's held calls are let go."""
    await _hanging_world(runtime, world, ws, 40)
    deps = dispatch_deps(runtime, graph=wide_graph)
    summary = DispatchSummary()
    task = asyncio.create_task(dispatch_due(deps, clock.now(), clock.now, summary))

    async def hanging() -> bool:
        return world.held == deps.fetch_concurrency

    await eventually(hanging)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (summary.fetch.calling, summary.fetch.slow, summary.fetch.waiting) == (0, 0, 0)

    async def let_go() -> bool:
        return world.held == 0

    await eventually(let_go)
