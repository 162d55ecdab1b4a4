"""AR-41 the attribution window per rule: a rule may name Meta's ``action_attribution_windows``
(one click window, with ``1d_view`` and ``1d_ev``); its Insights reads carry them in every mode,
in place of ``use_unified_attribution_setting``, and every record says which attribution its
numbers were read with (``unified`` when the rule names none). Windows Meta retired, unknown ones
and two click windows are refused, each naming its field. Against the Graph API simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import LogOnly, MetricValueCondition, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.sandbox.meta.world import SimCampaign
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    Workspace,
    create_account,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
    rule_body,
)

BUYERS = TaskIn(
    name="Count buyers",
    conditions=[
        MetricValueCondition(metric="purchases", period="today", operator="gte", value=Decimal(0))
    ],
    action=LogOnly(),
    cooldown="15m",
)
TODAY = {
    "spend": "100.00",
    "actions": [{"action_type": "purchase", "value": "19"}],
    "action_values": [{"action_type": "purchase", "value": "950.00"}],
}


@pytest.fixture
async def sim(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.add_campaign("act_1001", SimCampaign(id="9001", name="Shoes", insights={"today": TODAY}))
    world.grant(JOB_TOKEN, "act_1001")
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


async def _run(
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    clients: Clients,
    windows: list[str] | None,
    mode: str = "packed",
) -> ExecutionRecord:
    setup = await create_setup(runtime, ws.workspace_id, tasks=[BUYERS])
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    payload = msgspec.structs.replace(
        payload, rule=msgspec.structs.replace(payload.rule, attribution_windows=windows)
    )
    await run_account_job(make_deps(runtime, clients, mode=mode), payload)
    async with runtime.db.read() as session:
        record = await session.scalar(
            select(ExecutionRecord).where(ExecutionRecord.batch_id == payload.batch_id)
        )
    assert record is not None
    return record


def _insights_urls(world: GraphWorld) -> list[str]:
    return [u for call in world.batch_calls for _, u, _ in call if "/insights" in u]


async def test_ar41_without_windows_the_ad_sets_own_setting_is_read_and_recorded(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim

    record = await _run(runtime, ws, world, clients, None)

    assert record.attribution == "unified"
    assert Decimal(str(record.conditions[0]["seen"])) == 19
    [url] = _insights_urls(world)
    assert "use_unified_attribution_setting=true" in url
    assert "action_attribution_windows" not in url
    assert world.insights_windows_seen == [[]]


@pytest.mark.parametrize("mode", ["packed", "per_campaign", "account"])
async def test_ar41_the_rules_windows_go_with_every_insights_read_and_into_the_record(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients], mode: str
) -> None:
    world, clients = sim

    record = await _run(runtime, ws, world, clients, ["1d_click"], mode=mode)

    # One-day click counts fewer buyers than the unified 7-day click and 1-day view: 19 → 11.
    assert Decimal(str(record.conditions[0]["seen"])) == 11
    assert record.attribution == "1d_click"
    assert world.insights_windows_seen == [["1d_click"]]
    if mode != "account":
        [url] = _insights_urls(world)
        assert "action_attribution_windows=1d_click" in url
        assert "use_unified_attribution_setting" not in url


async def test_ar41_a_click_and_a_view_window_together(
    runtime: Runtime, ws: Workspace, sim: tuple[GraphWorld, Clients]
) -> None:
    world, clients = sim

    record = await _run(runtime, ws, world, clients, ["28d_click", "1d_view"])

    assert record.attribution == "28d_click,1d_view"
    assert Decimal(str(record.conditions[0]["seen"])) == 22  # 19 × 1.10 / 0.95
    assert world.insights_windows_seen == [["28d_click", "1d_view"]]


async def test_ar41_the_rule_document_takes_meta_windows_and_refuses_the_rest(
    client: Any, runtime: Runtime, ws: Workspace
) -> None:
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1001")
    ok = await client.post(
        "/api/v1/adrules/rules",
        json=rule_body(account_ids=[account.id], attribution_windows=["7d_click", "1d_view"]),
        headers=ws.headers,
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["attribution_windows"] == ["7d_click", "1d_view"]
    read = await client.get(f"/api/v1/adrules/rules/{ok.json()['id']}", headers=ws.headers)
    assert read.json()["attribution_windows"] == ["7d_click", "1d_view"]
    default = await client.post(
        "/api/v1/adrules/rules", json=rule_body(account_ids=[account.id]), headers=ws.headers
    )
    assert default.json()["attribution_windows"] is None

    cases = {
        ("7d_view",): ("attribution_windows[0]", "retired in January 2026"),
        ("28d_view", "1d_click"): ("attribution_windows[0]", "no longer reports"),
        ("2d_click",): ("attribution_windows[0]", "unknown attribution window"),
        ("1d_click", "7d_click"): ("attribution_windows", "choose one click window"),
        ("1d_view", "1d_view"): ("attribution_windows", "lists a window twice"),
        (): ("attribution_windows", "choose at least one window"),
    }
    for windows, (field, words) in cases.items():
        refused = await client.post(
            "/api/v1/adrules/rules",
            json=rule_body(account_ids=[account.id], attribution_windows=list(windows)),
            headers=ws.headers,
        )
        assert refused.status_code == 422, windows
        assert field in refused.text, windows
        assert words in refused.text, windows
