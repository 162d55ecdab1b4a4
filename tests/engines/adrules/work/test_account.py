"""The per-account job against the Graph API simulator over loopback (AR-14, AR-17, AR-18, AR-22)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from app.engines.adrules.models import Batch
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    ClockCondition,
    LogOnly,
    MetricMetricCondition,
    MetricValueCondition,
    PauseCampaign,
    TaskIn,
)
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)
from tests.harness.clock import manual_clock


@pytest.fixture
def workspace_id(ws: Any) -> int:
    return int(ws.workspace_id)


@pytest.fixture
async def graph(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


def _three_period_tasks() -> list[TaskIn]:
    """Two tasks reading three periods: today, yesterday and last_7d."""
    return [
        TaskIn(
            name="Pause losers",
            conditions=[
                MetricValueCondition(
                    metric="spend", period="today", operator="gt", value=Decimal("1")
                ),
                MetricMetricCondition(
                    metric="cpc",
                    period="today",
                    operator="gt",
                    other_metric="cpc",
                    other_period="last_7d",
                ),
            ],
            group="or",
            action=LogOnly(),
            cooldown="15m",
        ),
        TaskIn(
            name="Watch",
            conditions=[
                MetricValueCondition(
                    metric="purchase_roas", period="yesterday", operator="lt", value=Decimal("100")
                ),
                MetricValueCondition(
                    metric="ctr", period="last_7d", operator="gte", value=Decimal("0")
                ),
            ],
            action=LogOnly(),
            cooldown="15m",
        ),
    ]


async def _records(runtime: Runtime, batch_id: str) -> list[ExecutionRecord]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord)
            .where(ExecutionRecord.batch_id == batch_id)
            .order_by(ExecutionRecord.campaign_id, ExecutionRecord.task_id)
        )
        return list(rows.all())


async def _batch(runtime: Runtime, record_id: int) -> Batch:
    async with runtime.db.read() as session:
        batch = await session.get(Batch, record_id)
        assert batch is not None
        return batch


async def test_ar14_at_most_one_graph_call_per_campaign(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    """Per-campaign mode: one batch HTTP call per campaign carrying one sub-request per period."""
    world, clients = graph
    world.add_campaigns("act_1001", 12)
    setup = await create_setup(runtime, workspace_id, tasks=_three_period_tasks())
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    world.state.reset_counts()

    status = await run_account_job(make_deps(runtime, clients, mode="per_campaign"), payload)

    assert status == "completed"
    assert world.count("batch") == 12  # HTTP calls
    assert world.count("insights") == 12 * 3  # sub-requests: one per period
    periods = sorted({d["date_preset"] for kind, d in world.state.log if kind == "insights"})
    assert periods == ["last_7d", "today", "yesterday"]
    assert world.count("campaign.get") == 0  # log_only re-reads nothing
    records = await _records(runtime, payload.batch_id)
    assert len(records) == 12 * 2  # one per campaign and task
    assert {r.status for r in records} == {"executed"}


async def test_ar14_packed_and_account_level_modes_give_identical_results_with_far_fewer_calls(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaigns("act_1001", 40)
    world.campaign(next(iter(world.accounts["act_1001"].campaigns))).delivering = False
    setup = await create_setup(runtime, workspace_id, tasks=_three_period_tasks())
    entities = entities_from_world(world, "act_1001")

    seen: dict[str, list[Any]] = {}
    calls: dict[str, int] = {}
    for mode in ("per_campaign", "packed", "account"):
        payload = await make_payload(runtime, setup, entities)
        world.state.reset_counts()
        manual_clock(runtime).advance(3600)  # past the 15-minute cooldown of the first run
        await run_account_job(make_deps(runtime, clients, mode=mode), payload)
        # Batch calls, or for account-level reads the direct Insights requests.
        calls[mode] = world.count("batch") if mode != "account" else world.count("insights")
        seen[mode] = [
            (
                r.campaign_id,
                r.task_id,
                r.status,
                [(c["text"], c["seen"], c["passed"]) for c in r.conditions],
            )
            for r in await _records(runtime, payload.batch_id)
        ]
    assert seen["per_campaign"] == seen["packed"] == seen["account"]
    assert calls["per_campaign"] == 40
    assert calls["packed"] == 3  # 120 sub-requests, 16 campaigns × 3 periods per call
    assert calls["account"] == 3  # one level=campaign request per period
    assert world.count("batch") == 0


async def test_null_items_and_transient_item_errors_are_retried(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    campaigns = world.add_campaigns("act_1001", 5)
    setup = await create_setup(runtime, workspace_id, tasks=_three_period_tasks())
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    world.null_batch_items = 4  # Meta's batch timeout: the last items come back null
    world.fail(f"insights:{campaigns[0].id}", code=2, status=500, transient=True)

    status = await run_account_job(make_deps(runtime, clients, mode="packed"), payload)

    assert status == "completed"
    records = await _records(runtime, payload.batch_id)
    assert {r.status for r in records} == {"executed"}
    assert world.count("batch") == 2  # the first call, then one with the unfinished items only


async def test_ar22_one_campaign_erroring_while_the_others_complete(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    campaigns = world.add_campaigns("act_1001", 4)
    broken = campaigns[1].id
    world.fail(
        f"insights:{broken}", code=100, status=400, message="(#100) Invalid parameter", times=-1
    )
    tasks = [
        TaskIn(
            conditions=[MetricValueCondition(metric="spend", operator="gt", value=Decimal(0))],
            action=PauseCampaign(),
        )
    ]
    setup = await create_setup(runtime, workspace_id, tasks=tasks)
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))

    status = await run_account_job(make_deps(runtime, clients), payload)

    records = {r.campaign_id: r for r in await _records(runtime, payload.batch_id)}
    assert records[broken].status == "error"
    assert "Invalid parameter" in (records[broken].reason or "")
    assert [records[c.id].status for c in campaigns if c.id != broken] == ["executed"] * 3
    assert {cid for cid, _ in world.updates} == {c.id for c in campaigns if c.id != broken}
    batch = await _batch(runtime, payload.batch_record_id)
    assert status == batch.status == "completed"
    assert (batch.executed, batch.errors, batch.not_executed, batch.skipped) == (3, 1, 0, 0)
    assert batch.finished_at == runtime.clock.now()


async def test_ar18_record_fields(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="555", name="Spring", daily_budget=5000))
    tasks = [
        TaskIn(
            conditions=[
                MetricValueCondition(
                    metric="spend", period="today", operator="gt", value=Decimal("0")
                ),
                ClockCondition(hours=[9], weekdays=["mon"]),
            ],
            action=PauseCampaign(),
            cooldown="6h",
        ),
        TaskIn(
            conditions=[
                MetricValueCondition(metric="impressions", operator="lt", value=Decimal(1))
            ],
            action=PauseCampaign(),
        ),
    ]
    setup = await create_setup(runtime, workspace_id, tasks=tasks)
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))

    await run_account_job(make_deps(runtime, clients), payload)

    executed, not_executed = await _records(runtime, payload.batch_id)
    assert executed.status == "executed"
    assert executed.action == "pause_campaign"
    assert executed.parameters == {"type": "pause_campaign"}
    assert executed.before == {"status": "ACTIVE"}
    assert executed.after == {"status": "PAUSED"}
    assert [c["passed"] for c in executed.conditions] == [True, True]
    assert executed.conditions[1]["seen"] == "mon 09:00 (UTC)"
    assert [s["step"] for s in executed.steps] == [
        "insights_read",
        "custom_metrics",
        "evaluate",
        "cooldown",
        "write",
    ]
    assert executed.elapsed_seconds == pytest.approx(
        sum(s["seconds"] for s in executed.steps), abs=1e-5
    )
    assert executed.next_permitted_at == runtime.clock.now().replace() + __import__(
        "datetime"
    ).timedelta(hours=6)
    assert executed.batch_id == payload.batch_id
    assert not_executed.status == "not_executed"
    assert not_executed.reason is not None
    assert "impressions (today) < 1" in not_executed.reason


async def test_ar23a_a_mixed_account_three_insights_modes_identical_and_nothing_archived_written(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    """Archived and deleted campaigns in the job (a rule that names them): account-level Insights
    leave them out unless filtered on ``campaign.effective_status``, so the three read modes must
    still agree record for record, and no status or budget write reaches them."""
    world, clients = graph
    world.add_campaigns(
        "act_1001", 30, statuses=("ACTIVE", "ARCHIVED", "PAUSED", "DELETED", "ACTIVE")
    )
    tasks = [
        *_three_period_tasks(),
        TaskIn(
            name="Pause spenders",
            conditions=[
                MetricValueCondition(
                    metric="spend", period="today", operator="gte", value=Decimal("0")
                )
            ],
            action=PauseCampaign(),
            cooldown="15m",
        ),
    ]
    setup = await create_setup(runtime, workspace_id, tasks=tasks)
    entities = entities_from_world(world, "act_1001")

    seen: dict[str, list[Any]] = {}
    for mode in ("per_campaign", "packed", "account"):
        for campaign in world.accounts["act_1001"].campaigns.values():
            if campaign.effective_status not in ("ARCHIVED", "DELETED"):
                campaign.effective_status = "ACTIVE"  # undo the previous mode's pauses
        world.updates.clear()
        payload = await make_payload(runtime, setup, entities)
        manual_clock(runtime).advance(3600)
        await run_account_job(make_deps(runtime, clients, mode=mode), payload)
        records = await _records(runtime, payload.batch_id)
        seen[mode] = [
            (
                r.campaign_id,
                r.task_id,
                r.status,
                [(c["text"], c["seen"], c["passed"]) for c in r.conditions],
            )
            for r in records
        ]
        hidden = {e.id for e in entities if e.effective_status in ("ARCHIVED", "DELETED")}
        assert len(hidden) == 12
        assert {cid for cid, _ in world.updates} & hidden == set()
        pauses = [r for r in records if r.action == "pause_campaign"]
        assert {r.status for r in pauses if r.campaign_id in hidden} == {"skipped"}
        assert all(
            (r.reason or "").startswith("not_deliverable")
            for r in pauses
            if r.campaign_id in hidden
        )
        # Every archived and deleted campaign read as delivering, in every mode.
        spend = [r for r in records if r.campaign_id in hidden and r.action == "pause_campaign"]
        assert all(r.conditions[0]["passed"] for r in spend)
    assert world.insights_filters_seen
    assert all(
        {
            "field": "campaign.effective_status",
            "operator": "IN",
            "value": sorted({"ACTIVE", "ARCHIVED", "PAUSED", "DELETED"}),
        }
        in f
        for f in world.insights_filters_seen
    )
    assert seen["per_campaign"] == seen["packed"] == seen["account"]
