"""Funnels JSON API for experiments and journey analytics: the experiment report (per branch,
with intervals, the verdict and the winner's history, and the holdout's lift), declaring and
reverting a winner, the daily series per version and node (JSON and CSV), outcomes per version
and the comparison of two versions."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

import msgspec
from litestar import Response, get, post
from litestar.params import FromPath, JSONBody, QueryParameter

from app.engines.funnels.analytics import service as analytics
from app.engines.funnels.analytics.outcomes import OutcomesReport, VersionComparison
from app.engines.funnels.analytics.series import SeriesReport
from app.engines.funnels.campaigns.service import get_campaign
from app.engines.funnels.definitions import service
from app.engines.funnels.experiments import winners
from app.engines.funnels.experiments.campaign_holdout import campaign_holdout_report
from app.engines.funnels.experiments.report import (
    ExperimentsReport,
    HoldoutReport,
    WinnerRecord,
    experiments_report,
    winner_history,
)
from app.errors import NotFound
from app.platform import audit
from app.schemas import Key, Schema
from app.web.api.common import api_router
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Reads, Writes

StartQuery = Annotated[date | None, QueryParameter(name="start", description="first day (UTC)")]
EndQuery = Annotated[date | None, QueryParameter(name="end", description="last day (UTC)")]
WindowsQuery = Annotated[
    str | None, QueryParameter(name="windows", description="conversion windows in days: 1,7,30")
]


class NoHoldout(NotFound):
    code = "no_holdout"


class WinnerIn(Schema):
    branch: Key
    reason: Annotated[str, msgspec.Meta(max_length=2000)] = ""


def _record(row: Any) -> WinnerRecord:
    return WinnerRecord(
        id=row.id,
        branch=row.branch,
        decided_by=row.decided_by,
        decided_by_user=row.decided_by_user,
        reason=row.reason,
        decided_at=row.decided_at,
        reverted_at=row.reverted_at,
        reverted_by_user=row.reverted_by_user,
    )


@get("/{funnel_id:int}/experiments")
async def show_experiments(
    principal: CurrentPrincipal, session: Reads, funnel_id: FromPath[int]
) -> ExperimentsReport:
    """Each experiment of the funnel: per branch entered, converted, rate with its Wilson
    interval, revenue; the verdict (two-proportion z-test, minimum sample first) and the
    winner's history; and the holdout (control against everyone else, lift)."""
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    return await experiments_report(session, funnel)


@post("/{funnel_id:int}/experiments/{node_id:str}/winner", status_code=201)
async def declare_winner(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    node_id: FromPath[str],
    data: JSONBody[WinnerIn],
) -> WinnerRecord:
    """Declare a branch the winner: new entrants of the split go there until it is reverted."""
    funnel = await winners.funnel_in(uow.session, principal.workspace_id, funnel_id)
    row = await winners.declare(
        uow.session,
        funnel,
        node_id,
        data.branch,
        user_id=principal.user_id,
        now=clock.now(),
        reason=data.reason,
    )
    await audit.record(
        uow.session,
        action="funnel_experiment.winner_declared",
        object_type="funnel",
        object_id=funnel_id,
        workspace_id=principal.workspace_id,
        organisation_id=principal.organisation_id,
        after={"node_id": node_id, "branch": data.branch},
        now=clock.now(),
    )
    return _record(row)


@post("/{funnel_id:int}/experiments/{node_id:str}/winner/revert", status_code=200)
async def revert_winner(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    node_id: FromPath[str],
) -> WinnerRecord:
    """Withdraw the standing winner (declared or automatic): each contact gets their own branch
    again. The decision stays in the history."""
    funnel = await winners.funnel_in(uow.session, principal.workspace_id, funnel_id)
    row = await winners.revert(
        uow.session, funnel, node_id, user_id=principal.user_id, now=clock.now()
    )
    await audit.record(
        uow.session,
        action="funnel_experiment.winner_reverted",
        object_type="funnel",
        object_id=funnel_id,
        workspace_id=principal.workspace_id,
        organisation_id=principal.organisation_id,
        before={"node_id": node_id, "branch": row.branch},
        now=clock.now(),
    )
    return _record(row)


@get("/campaigns/{campaign_id:int}/holdout")
async def campaign_holdout(
    principal: CurrentPrincipal, session: Reads, campaign_id: FromPath[int]
) -> HoldoutReport:
    """The campaign's control share against the rest of its audience on the holdout's goal
    event (within its window from the snapshot): entered, converted, rates, lift, p-value."""
    campaign = await get_campaign(session, principal.workspace_id, campaign_id)
    report = await campaign_holdout_report(session, campaign)
    if report is None:
        raise NoHoldout(f"campaign {campaign_id} keeps no holdout")
    return report


@get("/{funnel_id:int}/experiments/{node_id:str}/winners")
async def list_winners(
    principal: CurrentPrincipal, session: Reads, funnel_id: FromPath[int], node_id: FromPath[str]
) -> list[WinnerRecord]:
    """Every winner decision of the experiment, newest first (reverted ones included)."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    return await winner_history(session, funnel_id, node_id)


@get("/{funnel_id:int}/analytics/series")
async def analytics_series(
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    start: StartQuery = None,
    end: EndQuery = None,
) -> SeriesReport:
    """Per version and node, one point per UTC day: entered, waiting (at the end of the day),
    exited (ended early there), converted (passed it and reached a goal that day)."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    first, last = analytics.date_range(start, end, clock.now().date())
    return await analytics.series(session, funnel_id, first, last)


@get("/{funnel_id:int}/analytics/series.csv", media_type="text/csv")
async def analytics_series_csv(
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    start: StartQuery = None,
    end: EndQuery = None,
) -> Response[str]:
    """The same series as CSV: one row per version, node and day."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    first, last = analytics.date_range(start, end, clock.now().date())
    text = analytics.to_csv(await analytics.series(session, funnel_id, first, last))
    return Response(
        text,
        media_type="text/csv",
        headers={
            "Content-Disposition": f'attachment; filename="funnel-{funnel_id}-{first}-{last}.csv"'
        },
    )


@get("/{funnel_id:int}/analytics/outcomes")
async def analytics_outcomes(
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    windows: WindowsQuery = None,
) -> OutcomesReport:
    """Per version: goal rate with its interval, conversion windows (reached a goal within N
    days of entering) and how the runs stand."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    return await analytics.outcomes(session, funnel_id, analytics.windows_of(windows))


@get("/{funnel_id:int}/analytics/compare")
async def analytics_compare(
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    a: Annotated[int, QueryParameter(name="a", ge=1, description="version number")],
    b: Annotated[int, QueryParameter(name="b", ge=1, description="version number")],
    windows: WindowsQuery = None,
) -> VersionComparison:
    """Two versions side by side on their outcomes; the goal rate's difference is judged by a
    two-proportion z-test."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    return await analytics.comparison(session, funnel_id, a, b, analytics.windows_of(windows))


ROUTERS: list[Any] = [
    api_router(
        "/funnels",
        [
            show_experiments,
            declare_winner,
            revert_winner,
            list_winners,
            campaign_holdout,
            analytics_series,
            analytics_series_csv,
            analytics_outcomes,
            analytics_compare,
        ],
        tag="funnels",
    )
]
