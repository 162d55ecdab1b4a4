"""Custom metrics you can trust (issue 18 item 8, AR-15): a sheet cell that is not an unambiguous
number — ``"1,5"``, ``"1.234,50"``, ``"1.234"`` — is a recorded condition error, never a guess; with
the sheet's locale named on the condition the same cells read right. End to end against the Sheets
simulator, plus the reading rules themselves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import CustomMetricCondition, LogOnly, TaskIn
from app.engines.adrules.work.account import run_account_job
from app.engines.adrules.work.sheets_values import SHEETS_API_KEY_SECRET, index_sheet
from app.platform import service
from app.runtime import Runtime
from app.sandbox.base import simulator_in_loop
from app.sandbox.meta import GraphWorld
from app.sandbox.sheets import SheetsSandbox
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)

SHEET_ID = "1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74"
ROWS: list[list[Any]] = [
    ["campaign_id", "value"],
    ["100001", "1,5"],
    ["100002", "1.234,50"],
    ["100003", "2.5"],
    ["100004", "1.234"],
]


@pytest.fixture
async def sheet_url() -> AsyncIterator[str]:
    sandbox = SheetsSandbox()
    sandbox.put_sheet(SHEET_ID, "Targets", ROWS)
    async with simulator_in_loop(sandbox) as url:
        yield url


async def _seen(
    runtime: Runtime, ws: Any, world: GraphWorld, url: str, locale: str | None
) -> dict[str, dict[str, Any]]:
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    world.add_campaigns("act_1001", 4, first_id=100000)
    async with runtime.db.write() as uow:
        await service.set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=ws.workspace_id,
            name=SHEETS_API_KEY_SECRET,
            value="sandbox-sheets-key",
            now=runtime.clock.now(),
        )
    cond = CustomMetricCondition(
        spreadsheet_id=SHEET_ID,
        sheet_name="Targets",
        lookup_column="A",
        value_column="B",
        operator="gte",
        value=Decimal(2),
        locale=locale,
    )
    setup = await create_setup(
        runtime, ws.workspace_id, tasks=[TaskIn(conditions=[cond], action=LogOnly())]
    )
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    clients = make_clients(world.base_url, url)
    try:
        await run_account_job(make_deps(runtime, clients), payload)
    finally:
        await clients.aclose()
    async with runtime.db.read() as session:
        rows = (
            await session.scalars(
                select(ExecutionRecord).where(ExecutionRecord.batch_id == payload.batch_id)
            )
        ).all()
    return {r.campaign_id: r.conditions[0] for r in rows}


async def test_ar15_locale_formats_without_a_locale_are_condition_errors(
    runtime: Runtime, ws: Any, world: GraphWorld, sheet_url: str
) -> None:
    seen = await _seen(runtime, ws, world, sheet_url, None)
    for campaign in ("100001", "100002", "100004"):
        assert seen[campaign]["seen"] is None
        assert seen[campaign]["passed"] is False
        assert "different locales" in seen[campaign]["reason"]
    assert seen["100003"]["seen"] == "2.5"  # unambiguous: read


async def test_ar15_the_sheets_locale_named_reads_them_right(
    runtime: Runtime, ws: Any, world: GraphWorld, sheet_url: str
) -> None:
    seen = await _seen(runtime, ws, world, sheet_url, "de_DE")
    assert seen["100001"]["seen"] == "1.5"
    assert seen["100002"]["seen"] == "1234.50"
    assert seen["100004"]["seen"] == "1234"
    assert seen["100003"]["seen"] is None  # "2.5" is not a de_DE number
    assert seen["100002"]["passed"] is True


def test_reading_rules_per_locale() -> None:
    rows: list[list[Any]] = [
        ["a", "1,234.50"],
        ["b", "0.125"],
        ["c", Decimal("7")],
        ["d", "1 234,5"],
    ]
    plain = index_sheet(rows, "A", "B")
    assert plain["a"].value is None
    assert "different locales" in (plain["a"].error or "")
    assert plain["b"].value == Decimal("0.125")  # no thousands group starts with 0
    assert plain["c"].value == Decimal(7)
    english = index_sheet(rows, "A", "B", "en_US")
    assert english["a"].value == Decimal("1234.50")
    assert english["d"].value is None
    french = index_sheet(rows, "A", "B", "fr")
    assert french["d"].value == Decimal("1234.5")
