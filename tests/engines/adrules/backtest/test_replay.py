"""AR-26 backtest: a rule replayed day by day over a known past — the exact would-be actions
with their clamps, cooldowns, the cross-rule guard and the pause's saved spend — reading daily
Insights in two Graph calls and writing nothing."""

from __future__ import annotations

from datetime import date

from sqlalchemy import func, select

from app.engines.adrules.backtest.schemas import BacktestAction, BacktestIn
from app.engines.adrules.backtest.service import backtest_saved
from app.engines.adrules.models import Batch
from app.engines.adrules.run_models import ExecutionRecord
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.backtest.history import build_history, build_world
from tests.engines.adrules.factories import Workspace, make_clients, make_deps

GUARD = "skipped:cross_rule_guard"


def _brief(a: BacktestAction) -> tuple[str, str, str, str, str | None, str | None]:
    """(day, object, task, outcome, before, after) of one would-be action."""
    before, after = a.before or {}, a.after or {}
    key = next(iter(before), None)
    outcome = a.outcome
    if outcome == "skipped" and (a.reason or "").startswith("cross_rule_guard"):
        outcome = GUARD
    return (
        a.day.isoformat(),
        a.object_id,
        a.task_name,
        outcome,
        None if key is None else str(before[key]),
        None if key is None else str(after[key]),
    )


async def test_ar26_backtest_replays_a_known_history_and_finds_the_exact_would_be_actions(
    runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    build_world(world)
    account, rule_id, _ = await build_history(runtime, ws.workspace_id)
    clients = make_clients(world.base_url)
    deps = make_deps(runtime, clients)
    world.state.reset_counts()
    try:
        result = await backtest_saved(
            deps,
            workspace_id=ws.workspace_id,
            rule_id=rule_id,
            data=BacktestIn(since=date(2026, 2, 20), until=date(2026, 2, 26)),
        )
    finally:
        await clients.aclose()

    assert [_brief(a) for a in result.actions] == [
        ("2026-02-20", "20", "Scale winners", "would_execute", "50.00", "60.00"),
        ("2026-02-20", "30", "Scale winners", "would_execute", "40.00", "48.00"),
        ("2026-02-21", "10", "Pause losers", "would_execute", "ACTIVE", "PAUSED"),
        ("2026-02-21", "20", "Scale winners", "would_execute", "60.00", "70.00"),
        ("2026-02-21", "30", "Scale winners", "would_execute", "48.00", "57.60"),
        ("2026-02-22", "10", "Pause losers", "not_executed", None, None),
        ("2026-02-22", "20", "Scale winners", "not_executed", None, None),
        ("2026-02-22", "30", "Scale winners", GUARD, "57.60", "69.12"),
        ("2026-02-23", "20", "Scale winners", "not_executed", None, None),
        ("2026-02-23", "30", "Scale winners", GUARD, "57.60", "69.12"),
        ("2026-02-24", "20", "Scale winners", "not_executed", None, None),
        ("2026-02-24", "30", "Scale winners", GUARD, "57.60", "69.12"),
        ("2026-02-25", "20", "Scale winners", "not_executed", None, None),
        ("2026-02-25", "30", "Scale winners", "would_execute", "57.60", "69.12"),
        ("2026-02-26", "20", "Scale winners", "not_executed", None, None),
        ("2026-02-26", "30", "Scale winners", "would_execute", "69.12", "70.00"),
    ]
    by_key = {(a.day.isoformat(), a.object_id): a for a in result.actions}
    clamped = by_key[("2026-02-21", "20")]
    assert clamped.after is not None
    assert clamped.after["clamped_at"] == "max"
    assert "already PAUSED" in (by_key[("2026-02-22", "10")].reason or "")
    assert "Trim budgets" in (by_key[("2026-02-22", "30")].reason or "")
    # Evaluated at 23:59 in New York: 04:59 UTC the next day.
    assert by_key[("2026-02-25", "30")].at.isoformat() == "2026-02-26T04:59:00+00:00"

    (entry,) = result.accounts
    assert entry.id == account.id
    assert entry.timezone == "America/New_York"
    assert entry.data_since == date(2026, 2, 17)  # last_3d looks back three days
    assert entry.spend_paused == "80.00"  # 50 + 0 + 10 + 10 + 10 while it would have been paused
    assert entry.budget_raised == "50.00"
    assert entry.budget_lowered == "0"
    assert result.totals.would_execute == 7
    assert result.totals.not_executed == 6
    assert result.totals.skipped == 3
    assert result.estimate
    assert "old decisions" in result.note

    paths = {o.id: o for o in result.objects}
    assert [d.status for d in paths["10"].days] == ["ACTIVE"] + ["PAUSED"] * 6
    assert [d.budget for d in paths["30"].days] == [
        "48.00",
        "57.60",
        "57.60",
        "57.60",
        "57.60",
        "69.12",
        "70.00",
    ]
    # One listing page and one batch call of daily Insights; nothing written, nothing recorded.
    assert result.graph_calls == 2
    assert world.state.count("batch") == 1
    assert world.updates == []
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Batch)) == 0
        assert await session.scalar(select(func.count()).select_from(ExecutionRecord)) == 1
