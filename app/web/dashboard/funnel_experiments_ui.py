"""The funnel's experiments and analytics page (``/ui/funnels/{id}/experiments``): each
experiment's branches with their intervals, the verdict and the winner (declare, revert), the
holdout's lift, the daily series of the latest version as a chart (the shared ``charts.js``),
outcomes per version with conversion windows, two versions compared, and the CSV download.

The page calls the same services as the API (:mod:`app.web.api.funnels_experiments`)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.funnels.analytics import service as analytics
from app.engines.funnels.analytics.outcomes import DEFAULT_WINDOWS, VersionComparison
from app.engines.funnels.analytics.series import SeriesReport
from app.engines.funnels.definitions import service
from app.engines.funnels.experiments import winners
from app.engines.funnels.experiments.report import experiments_report
from app.errors import DomainError
from app.platform import audit
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Reads, Writes

PREFIX = "/ui/funnels"
SERIES_COLOURS = {
    "entered": "#2453c7",
    "waiting": "#c98a04",
    "exited": "#b42318",
    "converted": "#157f3b",
}


class WinnerForm(msgspec.Struct, kw_only=True):
    branch: str = ""


def _parse_day(raw: str | None, name: str) -> date | None:
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise DomainError(f"{name}: a day as YYYY-MM-DD", code="invalid_day") from None


def series_chart(report: SeriesReport) -> dict[str, Any] | None:
    """The latest version's own line, one point a day, for ``static/charts.js``."""
    if not report.versions:
        return None
    latest = report.versions[-1]
    line = next(n for n in latest.nodes if n.node_id is None)
    x = [int(datetime.combine(p.day, time(0), UTC).timestamp()) for p in line.days]
    return {
        "x": x,
        "y_label": "runs",
        "title": f"Version {latest.version}, per day",
        "series": [
            {
                "label": label,
                "color": colour,
                "values": [getattr(p, label) for p in line.days],
            }
            for label, colour in SERIES_COLOURS.items()
        ],
    }


async def daily_chart(
    request: Request[Any, Any, Any], session: ReadSession, funnel_id: int
) -> dict[str, Any] | None:
    """The funnel page's day-by-day chart: the latest version over the last 30 days."""
    today = request.app.state.runtime.clock.now().date()
    first, last = analytics.date_range(None, None, today)
    return series_chart(await analytics.series(session, funnel_id, first, last))


def node_totals(report: SeriesReport) -> list[dict[str, Any]]:
    """Per node of the latest version: the range's entered, exited and converted, and who waits
    there at the end of its last day."""
    if not report.versions:
        return []
    out = []
    for n in report.versions[-1].nodes:
        out.append(
            {
                "node_id": n.node_id or "all runs",
                "kind": n.kind,
                "entered": sum(p.entered for p in n.days),
                "waiting": n.days[-1].waiting if n.days else 0,
                "exited": sum(p.exited for p in n.days),
                "converted": sum(p.converted for p in n.days),
            }
        )
    return out


@get(f"{PREFIX}/{{funnel_id:int}}/experiments")
async def experiments_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    start: FromQuery[str | None] = None,
    end: FromQuery[str | None] = None,
    a: FromQuery[int | None] = None,
    b: FromQuery[int | None] = None,
    notice: FromQuery[str | None] = None,
) -> Template:
    funnel = await service.get_funnel(session, principal.workspace_id, funnel_id)
    report = await experiments_report(session, funnel)
    error = None
    try:
        first, last = analytics.date_range(
            _parse_day(start, "start"), _parse_day(end, "end"), clock.now().date()
        )
    except DomainError as exc:
        error = exc.message
        first, last = analytics.date_range(None, None, clock.now().date())
    series = await analytics.series(session, funnel_id, first, last)
    outcomes = await analytics.outcomes(session, funnel_id)
    compared: VersionComparison | None = None
    numbers = [v.version for v in outcomes.versions]
    if a is not None and b is not None:
        try:
            compared = await analytics.comparison(session, funnel_id, a, b, DEFAULT_WINDOWS)
        except DomainError as exc:
            error = exc.message
    elif len(numbers) >= 2:
        compared = await analytics.comparison(
            session, funnel_id, numbers[-2], numbers[-1], DEFAULT_WINDOWS
        )
    return page(
        request,
        "funnels/experiments.html",
        principal,
        funnel=funnel,
        report=report,
        chart=series_chart(series),
        totals=node_totals(series),
        start=first.isoformat(),
        end=last.isoformat(),
        outcomes=outcomes,
        numbers=numbers,
        compared=compared,
        error=error,
        notice=notice,
    )


@get(f"{PREFIX}/{{funnel_id:int}}/experiments/series.csv", media_type="text/csv")
async def series_csv_page(
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    start: FromQuery[str | None] = None,
    end: FromQuery[str | None] = None,
) -> Response[str]:
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    first, last = analytics.date_range(
        _parse_day(start, "start"), _parse_day(end, "end"), clock.now().date()
    )
    text = analytics.to_csv(await analytics.series(session, funnel_id, first, last))
    return Response(
        text,
        media_type="text/csv",
        headers={
            "Content-Disposition": f'attachment; filename="funnel-{funnel_id}-{first}-{last}.csv"'
        },
    )


def _back(funnel_id: int, notice: str) -> Redirect:
    return Redirect(f"{PREFIX}/{funnel_id}/experiments?notice={quote(notice)}")


@post(f"{PREFIX}/{{funnel_id:int}}/experiments/{{node_id:str}}/winner")
async def declare_winner_page(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    node_id: FromPath[str],
    data: URLEncodedBody[WinnerForm],
) -> Redirect:
    funnel = await winners.funnel_in(uow.session, principal.workspace_id, funnel_id)
    try:
        async with uow.attempt():
            await winners.declare(
                uow.session,
                funnel,
                node_id,
                data.branch,
                user_id=principal.user_id,
                now=clock.now(),
            )
    except DomainError as exc:
        return _back(funnel_id, f"Not declared: {exc.message}")
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
    return _back(funnel_id, f"'{data.branch}' now gets every new entrant of '{node_id}'")


@post(f"{PREFIX}/{{funnel_id:int}}/experiments/{{node_id:str}}/winner/revert")
async def revert_winner_page(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    funnel_id: FromPath[int],
    node_id: FromPath[str],
) -> Redirect:
    funnel = await winners.funnel_in(uow.session, principal.workspace_id, funnel_id)
    try:
        async with uow.attempt():
            row = await winners.revert(
                uow.session, funnel, node_id, user_id=principal.user_id, now=clock.now()
            )
    except DomainError as exc:
        return _back(funnel_id, f"Not reverted: {exc.message}")
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
    return _back(funnel_id, f"Winner reverted: each contact gets their own branch of '{node_id}'")


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [experiments_page, series_csv_page, declare_winner_page, revert_winner_page]
PUBLIC_ROUTES: list[Any] = []
