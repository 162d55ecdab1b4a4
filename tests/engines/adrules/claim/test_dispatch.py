"""The read-only dispatcher against the Graph API simulator over loopback (AR-10 to AR-13, AR-20,
AR-22, AR-23, AR-24)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import date, timedelta

import msgspec
from sqlalchemy import select, update

from app.clock import ManualClock
from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.models import AdAccount, Batch, Rule
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.models import Job
from tests.conftest import eventually
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    dispatch_deps,
    store_token,
)
from tests.harness.sleep import RecordingSleep


async def _jobs(runtime: Runtime) -> list[RunAccountPayload]:
    async with runtime.db.read() as session:
        rows = (await session.execute(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).scalars()
        return [msgspec.json.decode(j.payload, type=RunAccountPayload) for j in rows]


async def _batches(runtime: Runtime) -> list[Batch]:
    async with runtime.db.read() as session:
        return list((await session.execute(select(Batch).order_by(Batch.id))).scalars())


async def _rule(runtime: Runtime, rule_id: int) -> Rule:
    async with runtime.db.read() as session:
        rule = await session.get(Rule, rule_id)
        assert rule is not None
        return rule


async def _setup_accounts(
    runtime: Runtime, world: GraphWorld, ws: Workspace, spec: dict[str, tuple[int, bool]]
) -> dict[str, int]:
    """``spec``: meta id -> (campaigns, active). Returns meta id -> our account id."""
    ids = {}
    for meta_id, (campaigns, active) in spec.items():
        world.add_account(meta_id, f"Account {meta_id}")
        world.add_campaigns(meta_id, campaigns)
        world.grant(TOKEN, meta_id)
        account = await create_account(
            runtime, workspace_id=ws.workspace_id, meta_id=meta_id, active=active
        )
        ids[meta_id] = account.id
    await store_token(runtime, ws.workspace_id)
    return ids


async def test_ar13_one_job_per_active_account_carrying_everything_the_worker_needs(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(
        runtime, world, ws, {"act_1": (3, True), "act_2": (5, True), "act_3": (4, False)}
    )
    rule_id = await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values())
    )
    now = runtime.clock.now()

    summary = await dispatch_due(dispatch_deps(runtime, graph=graph), now, runtime.clock.now)

    assert summary.rules == 1
    assert summary.jobs == 2
    jobs = sorted(await _jobs(runtime), key=lambda p: p.account.meta_id)
    assert [j.account.meta_id for j in jobs] == ["act_1", "act_2"]
    assert [len(j.entities) for j in jobs] == [3, 5]
    assert {j.batch_id for j in jobs} == {summary.batch_ids[0]}
    assert all(j.rule.id == rule_id and j.rule.tasks for j in jobs)
    assert all(j.access_token(runtime.secrets) == TOKEN for j in jobs)
    assert jobs[0].entities[0].daily_budget == 5000
    # AR-20: the inactive account got no job and no Graph call; its batch says why (skipped).
    batches = await _batches(runtime)
    assert [(b.account_meta_id, b.status, b.entities) for b in batches] == [
        ("act_1", "queued", 3),
        ("act_2", "queued", 5),
        ("act_3", "skipped", 0),
    ]
    assert batches[2].error is not None
    assert "not active" in batches[2].error
    assert {j.batch_record_id for j in jobs} == {b.id for b in batches[:2]}
    assert [
        kind
        for kind, details in world.state.log
        if kind == "campaigns.list" and details["scope"] == "act_3"
    ] == []
    # AR-24: the queue never holds the token in clear.
    async with runtime.db.read() as session:
        raw = (await session.execute(select(Job.payload))).scalars().all()
    assert raw
    assert all(TOKEN.encode() not in payload for payload in raw)


async def test_ar10_claim_advances_next_execution_so_a_repeated_sweep_dispatches_nothing(
    runtime: Runtime, clock: ManualClock, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True)})
    rule_id = await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values())
    )
    deps = dispatch_deps(runtime, graph=graph)
    start = clock.now()
    assert (await _rule(runtime, rule_id)).next_execution_at == start

    first = await dispatch_due(deps, start, clock.now)
    again = await dispatch_due(deps, start, clock.now)

    assert (first.rules, again.rules) == (1, 0)
    rule = await _rule(runtime, rule_id)
    assert rule.next_execution_at == start + timedelta(minutes=15)
    assert rule.last_dispatched_at == start
    assert rule.last_batch_id == first.batch_ids[0]

    clock.advance(minutes=14, seconds=59)
    assert (await dispatch_due(deps, clock.now(), clock.now)).rules == 0
    clock.advance(seconds=1)
    assert (await dispatch_due(deps, clock.now(), clock.now)).rules == 1
    assert len(await _jobs(runtime)) == 2


async def test_ar10_concurrent_sweeps_in_one_process_dispatch_a_rule_once(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True)})
    for _ in range(5):
        await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    deps = dispatch_deps(runtime, graph=graph)
    now = runtime.clock.now()
    summaries = await asyncio.gather(
        *(dispatch_due(deps, now, runtime.clock.now) for _ in range(4))
    )
    assert sum(s.rules for s in summaries) == 5
    assert len(await _jobs(runtime)) == 5


async def test_ar10_ar20_drafts_paused_archived_out_of_window_and_inactive_accounts_never_dispatched(
    runtime: Runtime, clock: ManualClock, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True), "act_2": (2, True)})
    active_account, inactive_account = ids["act_1"], ids["act_2"]
    today = clock.now().date()
    rule_ids = [
        await create_rule(
            runtime, workspace_id=ws.workspace_id, status="draft", account_ids=[active_account]
        ),
        await create_rule(
            runtime, workspace_id=ws.workspace_id, status="paused", account_ids=[active_account]
        ),
        await create_rule(
            runtime,
            workspace_id=ws.workspace_id,
            account_ids=[active_account],
            schedule={
                "mode": "interval",
                "minutes": 15,
                "start_date": str(today + timedelta(days=2)),
            },
        ),
        await create_rule(
            runtime,
            workspace_id=ws.workspace_id,
            account_ids=[active_account],
            schedule={
                "mode": "interval",
                "minutes": 15,
                "end_date": str(today - timedelta(days=1)),
            },
        ),
        await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=[inactive_account]),
    ]
    # Even with a due timestamp, status and window decide: force every rule due. The account
    # of the last rule is deactivated after the rule went live (activation needs an active one).
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(AdAccount).where(AdAccount.id == inactive_account).values(active=False)
        )
        await uow.session.execute(
            update(Rule).values(next_execution_at=clock.now() - timedelta(minutes=1))
        )
        await uow.session.execute(
            update(Rule).where(Rule.id == rule_ids[1]).values(status="archived")
        )
        await uow.session.execute(
            update(Rule).where(Rule.id == rule_ids[0]).values(status="paused")
        )

    summary = await dispatch_due(dispatch_deps(runtime, graph=graph), clock.now(), clock.now)

    # Only the active, in-window rule on the inactive account is claimed; it dispatches nothing
    # and its batch says why (AR-20, AR-22: a skip is recorded, not swallowed).
    assert summary.rules == 1
    assert summary.jobs == 0
    [batch] = await _batches(runtime)
    assert batch.status == "skipped"
    assert "not active" in (batch.error or "")
    assert world.count("campaigns.list") == 0


async def test_ar10_window_opens_then_the_rule_runs(
    runtime: Runtime, clock: ManualClock, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (1, True)})
    start = clock.now().date() + timedelta(days=1)
    rule_id = await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=list(ids.values()),
        schedule={"mode": "interval", "minutes": 15, "start_date": str(start)},
    )
    deps = dispatch_deps(runtime, graph=graph)
    assert (await dispatch_due(deps, clock.now(), clock.now)).rules == 0
    clock.set((await _rule(runtime, rule_id)).next_execution_at)  # type: ignore[arg-type]
    assert (await dispatch_due(deps, clock.now(), clock.now)).jobs == 1


async def test_ar11_prefilters_reach_meta_as_filtering(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (0, True)})
    world.add_campaigns("act_1", 6, name="Brand {n}", statuses=("ACTIVE", "PAUSED", "ARCHIVED"))
    world.add_campaigns("act_1", 6, name="Promo {n}", statuses=("ACTIVE", "PAUSED", "ARCHIVED"))
    await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=list(ids.values()),
        prefilters={
            "name_contains": "promo",
            "effective_status": {"operator": "not_in", "values": ["ARCHIVED"]},
        },
    )
    await dispatch_due(dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now)

    assert world.filters_seen == [
        [
            {"field": "name", "operator": "CONTAIN", "value": "promo"},
            # A NOT_IN always keeps archived and deleted out (AR-23a).
            {"field": "effective_status", "operator": "NOT_IN", "value": ["ARCHIVED", "DELETED"]},
        ]
    ]
    (job,) = await _jobs(runtime)
    # Names count from the account's first campaign; statuses cycle within each call.
    assert sorted((e.name, e.effective_status) for e in job.entities) == [
        ("Promo 10", "ACTIVE"),
        ("Promo 11", "PAUSED"),
        ("Promo 7", "ACTIVE"),
        ("Promo 8", "PAUSED"),
    ]


async def test_ar12_every_page_followed_including_short_and_empty_pages(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2_500, True)})
    # Pages of 1000, 7 (short), 0 (empty, next still present), then full pages, then an empty
    # trailing page announced by ``next``.
    world.page_sizes = [1000, 7, 0]
    world.trailing_empty_page = True
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))

    await dispatch_due(dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now)

    (job,) = await _jobs(runtime)
    assert len(job.entities) == 2_500
    assert len({e.id for e in job.entities}) == 2_500
    (batch,) = await _batches(runtime)
    # 1000 + 7 + 0 + 1000 + 493 + trailing empty page
    assert batch.pages == 6
    assert world.count("campaigns.list") == 6
    limits = [d for kind, d in world.state.log if kind == "campaigns.list"]
    assert len(limits) == 6


async def test_ar12_a_failing_fetch_is_retried_1s_then_2s(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (3, True)})
    world.fail("campaigns.list", code=2, status=500, times=2)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    sleep = RecordingSleep()

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )

    assert sleep.waits == [1.0, 2.0]
    assert summary.jobs == 1
    (batch,) = await _batches(runtime)
    assert (batch.status, batch.fetch_attempts, batch.entities) == ("queued", 3, 3)


async def test_ar12_retry_waits_on_the_clock(
    runtime: Runtime, clock: ManualClock, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    """The waits are real waits on the injected clock: nothing happens until 1 s, then 2 s, pass."""
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (3, True)})
    world.fail("campaigns.list", code=17, status=400, times=2)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    # The fetch's own timers (its slot and its deadline) sleep on the clock beside the retry's
    # wait: set far off, they stay two constant sleepers; no tick budget.
    deps = dataclasses.replace(
        dispatch_deps(runtime, graph=graph, sleep=clock.sleep),
        fetch_slot_seconds=100,
        fetch_deadline_seconds=100,
        tick_budget_seconds=None,
    )
    started = clock.now()
    task = asyncio.create_task(dispatch_due(deps, started, clock.now))
    timers = 2

    async def sleeping() -> bool:
        return clock.sleepers == timers + 1

    await eventually(sleeping)
    assert world.count("campaigns.list") == 1
    clock.advance(0.999)
    # Still asleep: a wait the advance had ended would have left the clock's sleepers at once.
    assert clock.sleepers == timers + 1
    assert world.count("campaigns.list") == 1
    clock.advance(0.001)
    await eventually(sleeping)
    assert world.count("campaigns.list") == 2
    clock.advance(1.999)
    assert clock.sleepers == timers + 1
    assert world.count("campaigns.list") == 2
    clock.advance(0.001)
    summary = await asyncio.wait_for(task, 10)
    assert world.count("campaigns.list") == 3
    assert summary.jobs == 1
    assert clock.now() - started == timedelta(seconds=3)


async def test_ar12_ar22_account_skipped_after_three_failures_while_others_are_dispatched(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(
        runtime, world, ws, {"act_1": (2, True), "act_2": (2, True), "act_3": (2, True)}
    )
    world.fail("campaigns.list:act_2", code=2, status=503, times=3, message="Service unavailable")
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    sleep = RecordingSleep()

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )

    assert sleep.waits == [1.0, 2.0]
    assert (summary.jobs, summary.skipped_accounts) == (2, 1)
    assert sorted(j.account.meta_id for j in await _jobs(runtime)) == ["act_1", "act_3"]
    records = {b.account_meta_id: b for b in await _batches(runtime)}
    assert records["act_2"].status == "skipped"
    assert records["act_2"].fetch_attempts == 3
    assert "Service unavailable" in (records["act_2"].error or "")
    assert records["act_2"].finished_at is not None
    assert {records["act_1"].status, records["act_3"].status} == {"queued"}
    assert len({b.batch_id for b in records.values()}) == 1


PERMANENT = [
    (190, 400, "Error validating access token: Session has expired"),
    (100, 400, "Invalid parameter"),
    (200, 403, "Permissions error"),
]


async def test_ar12_permanent_errors_are_not_retried(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    metas = [f"act_{i + 1}" for i in range(len(PERMANENT))]
    ids = await _setup_accounts(runtime, world, ws, {m: (2, True) for m in metas})
    for meta_id, (code, status, message) in zip(metas, PERMANENT, strict=True):
        world.fail(f"campaigns.list:{meta_id}", code=code, status=status, message=message, times=3)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    sleep = RecordingSleep()

    await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )

    assert sleep.waits == []
    assert world.count("campaigns.list") == len(PERMANENT)
    records = {b.account_meta_id: b for b in await _batches(runtime)}
    for meta_id, (_, _, message) in zip(metas, PERMANENT, strict=True):
        batch = records[meta_id]
        assert (batch.status, batch.fetch_attempts) == ("skipped", 1)
        assert message in (batch.error or "")
        assert "permanent" in (batch.error or "")
        assert TOKEN not in (batch.error or "")


async def test_ar12_a_non_json_200_is_transient_and_retried(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True), "act_2": (2, True)})
    world.answer_html("campaigns.list:act_1", times=1)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    sleep = RecordingSleep()

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )

    # An HTML page with 200 is what an overloaded edge sends: tried again after 1 s, it works.
    assert (summary.jobs, summary.skipped_accounts) == (2, 0)
    assert sleep.waits == [1.0]
    records = {b.account_meta_id: (b.status, b.fetch_attempts) for b in await _batches(runtime)}
    assert records == {"act_1": ("queued", 2), "act_2": ("queued", 1)}


async def test_ar22_a_reply_that_stays_unreadable_skips_the_account(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True), "act_2": (2, True)})
    world.answer_html("campaigns.list:act_1", times=3)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    sleep = RecordingSleep()

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )

    assert (summary.jobs, summary.skipped_accounts) == (1, 1)
    assert sleep.waits == [1.0, 2.0]
    records = {b.account_meta_id: b for b in await _batches(runtime)}
    assert (records["act_1"].status, records["act_1"].fetch_attempts) == ("skipped", 3)
    assert "not JSON" in (records["act_1"].error or "")
    assert records["act_2"].status == "queued"


async def test_ar12_throttle_waits_as_long_as_meta_asks_within_the_limit(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True)})
    world.throttle("campaigns.list", minutes=0, times=1)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    sleep = RecordingSleep()
    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )
    assert sleep.waits == [1.0]
    assert summary.jobs == 1


async def test_ar12_a_long_throttle_skips_the_account_without_holding_the_sweep(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True)})
    world.throttle("campaigns.list", minutes=30, times=3)
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    sleep = RecordingSleep()
    await dispatch_due(
        dispatch_deps(runtime, graph=graph, sleep=sleep), runtime.clock.now(), runtime.clock.now
    )
    assert sleep.waits == []
    (batch,) = await _batches(runtime)
    assert batch.status == "skipped"
    assert "80004" in (batch.error or "")


async def test_ar24_no_token_skips_every_account_with_a_reason(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=[account.id])
    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now
    )
    assert (summary.jobs, summary.skipped_accounts) == (0, 1)
    (batch,) = await _batches(runtime)
    assert batch.status == "skipped"
    assert "access token" in (batch.error or "")
    assert world.count() == 0


async def test_empty_campaign_list_is_recorded_without_a_job(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (0, True)})
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values()))
    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now
    )
    assert (summary.jobs, summary.empty_accounts) == (0, 1)
    assert [b.status for b in await _batches(runtime)] == ["empty"]


async def test_ar23_platform_stop_dispatches_nothing(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (2, True)})
    rule_id = await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=list(ids.values())
    )
    before = (await _rule(runtime, rule_id)).next_execution_at

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph, stopped=True), runtime.clock.now(), runtime.clock.now
    )

    assert summary.stopped
    assert summary.rules == 0
    assert (await _rule(runtime, rule_id)).next_execution_at == before
    assert world.count() == 0
    assert await _jobs(runtime) == []


async def test_ar10_timetable_rule_advances_to_its_next_slot(
    runtime: Runtime, clock: ManualClock, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    ids = await _setup_accounts(runtime, world, ws, {"act_1": (1, True)})
    # Monday 2026-03-02 09:00 UTC; the workspace is in UTC.
    rule_id = await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=list(ids.values()),
        schedule={"mode": "timetable", "week": {"mon": ["09:00", "09:30"], "tue": ["08:00"]}},
    )
    rule = await _rule(runtime, rule_id)
    assert rule.next_execution_at == clock.now() + timedelta(minutes=30)
    clock.advance(minutes=30)
    deps = dispatch_deps(runtime, graph=graph)
    assert (await dispatch_due(deps, clock.now(), clock.now)).jobs == 1
    rule = await _rule(runtime, rule_id)
    assert rule.next_execution_at is not None
    assert rule.next_execution_at.date() == date(2026, 3, 3)
    assert (rule.next_execution_at.hour, rule.next_execution_at.minute) == (8, 0)
