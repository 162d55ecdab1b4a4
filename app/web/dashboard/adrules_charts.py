"""The rule log's charts (drawn by ``static/charts.js`` over the vendored uPlot): the run history —
objects executed, skipped and in error per batch — and each object's budget before and after the
rule's executions over time, read back from the records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.db.session import ReadSession
from app.engines.adrules import budget_history
from app.engines.adrules.models import Batch
from app.engines.adrules.run_models import RECORD_EXECUTED, RECORD_WOULD_EXECUTE

PALETTE = ("#2453c7", "#157f3b", "#b42318", "#c98a04", "#7a3fc2", "#0e7490")
MAX_OBJECTS = len(PALETTE)
"""Objects one budget chart draws (the most recently changed), two lines each."""


def run_history(batches: Sequence[Batch]) -> dict[str, Any] | None:
    """Executed, skipped and errors per batch, oldest first; batches of one dispatch (created at
    the same second, one per ad account) are added up. ``None`` without batches."""
    if not batches:
        return None
    per_second: dict[int, list[int]] = {}
    for b in batches:
        counts = per_second.setdefault(int(b.created_at.timestamp()), [0, 0, 0])
        counts[0] += b.executed
        counts[1] += b.skipped
        counts[2] += b.errors
    x = sorted(per_second)
    return {
        "x": x,
        "series": [
            {"label": "executed", "values": [per_second[t][0] for t in x], "color": "#157f3b"},
            {"label": "skipped", "values": [per_second[t][1] for t in x], "color": "#c98a04"},
            {"label": "errors", "values": [per_second[t][2] for t in x], "color": "#b42318"},
        ],
        "y_label": "objects",
    }


def budgets(objects: Sequence[budget_history.ObjectBudgets]) -> dict[str, Any] | None:
    """Per object a solid line of the budget after each execution and a dashed one of the budget
    before it, on one time axis (an object without a change at a time is a gap the line spans).
    Two changes of one object at the same second (two tasks of one run) show the budget before
    the first and after the last."""
    shown = [o for o in objects if o.points][:MAX_OBJECTS]
    if not shown:
        return None
    x = sorted({int(p.at.timestamp()) for o in shown for p in o.points})
    at = {t: i for i, t in enumerate(x)}
    series: list[dict[str, Any]] = []
    for colour, obj in zip(PALETTE, shown, strict=False):
        before: list[float | None] = [None] * len(x)
        after: list[float | None] = [None] * len(x)
        for point in obj.points:
            i = at[int(point.at.timestamp())]
            if before[i] is None:
                before[i] = float(point.before)
            after[i] = float(point.after)
        lifetime = any(p.budget == "lifetime_budget" for p in obj.points)
        name = (obj.name or obj.object_id)[:40] + (" lifetime" if lifetime else "")
        series.append(
            {
                "label": f"{name} after",
                "values": after,
                "color": colour,
                "span_gaps": True,
                "object": obj.object_id,
            }
        )
        series.append(
            {
                "label": f"{name} before",
                "values": before,
                "color": colour,
                "dash": [6, 4],
                "span_gaps": True,
                "object": obj.object_id,
            }
        )
    return {
        "x": x,
        "series": series,
        "y_label": "budget",
        "objects": len(objects),
        "shown": len(shown),
    }


async def rule_budget_chart(
    session: ReadSession, workspace_id: int, rule_id: int
) -> dict[str, Any] | None:
    """The budgets the rule's executions recorded, for the objects it changed most recently."""
    return budgets(await budget_history.rule_budgets(session, workspace_id, rule_id))


async def batch_budget_chart(session: ReadSession, batch: Batch) -> dict[str, Any] | None:
    """The budget history, under the batch's rule, of the objects this batch changed (a shadow
    batch: would have changed, from its rule's shadow records)."""
    status = RECORD_WOULD_EXECUTE if batch.shadow else RECORD_EXECUTED
    changed = await budget_history.batch_budget_objects(session, batch, status)
    objects = await budget_history.rule_budgets(
        session, batch.workspace_id, batch.rule_id, object_ids=changed, status=status
    )
    return budgets(objects)
