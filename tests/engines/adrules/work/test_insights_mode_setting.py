"""``ADRULES_INSIGHTS_MODE`` picks how the worker reads Insights (AR-14): ``packed`` (the default),
``per_campaign`` or ``account``. The job handler honours the setting, seen from the Graph simulator's
call counters; an unknown mode is refused when the settings load."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from app.engines.adrules.jobs import run_account
from app.engines.adrules.schemas import LogOnly, MetricValueCondition, TaskIn
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.settings import AdRulesSettings, load_settings
from app.settings_fields import SettingsError
from app.wiring import assemble
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Workspace,
    create_setup,
    entities_from_world,
    make_payload,
)

TASKS = [
    TaskIn(
        name="Two periods",
        conditions=[
            MetricValueCondition(metric="spend", period="today", operator="gte", value=Decimal(0)),
            MetricValueCondition(
                metric="clicks", period="yesterday", operator="gte", value=Decimal(0)
            ),
        ],
        action=LogOnly(),
        cooldown="15m",
    )
]


def test_the_mode_is_read_from_the_environment() -> None:
    assert load_settings({}).adrules.insights_mode == "packed"
    for mode in ("packed", "per_campaign", "account"):
        assert load_settings({"ADRULES_INSIGHTS_MODE": mode}).adrules.insights_mode == mode
    with pytest.raises(SettingsError, match="ADRULES_INSIGHTS_MODE"):
        load_settings({"ADRULES_INSIGHTS_MODE": "sideways"})


@pytest.mark.parametrize(
    ("mode", "batch_calls", "insights_requests"),
    [
        # 30 campaigns × 2 periods = 60 sub-requests: 25 campaigns (50 items) per batch call.
        ("packed", 2, 60),
        ("per_campaign", 30, 60),
        # One level=campaign request per period, no batch call.
        ("account", 0, 2),
    ],
)
async def test_the_job_reads_insights_in_the_configured_mode(
    mode: str,
    batch_calls: int,
    insights_requests: int,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
) -> None:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaigns("act_1001", 30)
    setup = await create_setup(runtime, ws.workspace_id, tasks=TASKS)
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    settings = dataclasses.replace(runtime.settings, adrules=AdRulesSettings(insights_mode=mode))
    configured = assemble(settings, runtime.clock, db=runtime.db)  # a process with that setting
    try:
        await run_account(configured.context(), payload)
    finally:
        await configured.resources.aclose()
        await configured.queue.aclose()

    assert (world.count("batch"), world.count("insights")) == (batch_calls, insights_requests)
