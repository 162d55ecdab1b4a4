"""Ad rules JSON API, the backtest: what a saved or unsaved rule would have done over a past
range, replayed on Meta's daily Insights. Reads only — nothing is written to Meta or recorded —
and the answer says it is an estimate. Scoped to the caller's workspace: another workspace's rule
or ad account answers 404."""

from __future__ import annotations

from litestar import post
from litestar.params import FromPath, JSONBody

from app.engines.adrules.backtest.schemas import BacktestDocumentIn, BacktestIn, BacktestResult
from app.engines.adrules.backtest.service import backtest_document, backtest_saved
from app.web.api.adrules_runs import preview_deps
from app.web.api.common import api_router
from app.web.auth import CurrentPrincipal, CurrentRuntime


@post("/rules/{rule_id:int}/backtest", status_code=200)
async def backtest_rule(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    rule_id: FromPath[int],
    data: JSONBody[BacktestIn],
) -> BacktestResult:
    """Replay the saved rule day by day over ``since`` … ``until``; writes nothing."""
    return await backtest_saved(
        preview_deps(runtime), workspace_id=principal.workspace_id, rule_id=rule_id, data=data
    )


@post("/backtest", status_code=200)
async def backtest_unsaved(
    principal: CurrentPrincipal, runtime: CurrentRuntime, data: JSONBody[BacktestDocumentIn]
) -> BacktestResult:
    """Replay a rule document not saved yet (``rule``, as ``POST /rules`` takes it); writes
    nothing."""
    return await backtest_document(
        preview_deps(runtime), workspace_id=principal.workspace_id, data=data
    )


ROUTERS = [api_router("/adrules", [backtest_rule, backtest_unsaved], tag="adrules")]
