"""Position reports in the JSON API under ``/api/v1/ranktracking``: the positions table of a
schedule (keywords × recent runs per device, change, best position, ranking URL, search volume),
filtered, sorted and paged, and the per-run average position and visibility, paged.

Every lookup is scoped by the caller's workspace: another workspace's schedule answers 404."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Response, get, put
from litestar.params import FromQuery, JSONBody, QueryParameter

from app.engines.ranktracking import locations
from app.engines.ranktracking.balance_history import DAYS, BalanceChart, balance_history
from app.engines.ranktracking.reports import export
from app.engines.ranktracking.reports.competitors import set_competitors
from app.engines.ranktracking.reports.positions import (
    DEFAULT_COLUMNS,
    DEFAULT_LIMIT,
    MAX_COLUMNS,
    MAX_LIMIT,
    SORT_KEYS,
    TOP_BANDS,
    TableQuery,
    positions_page,
)
from app.engines.ranktracking.reports.rivals import RivalsOut, who_gained
from app.engines.ranktracking.reports.schemas import (
    CompetitorsIn,
    CompetitorsOut,
    PositionsPage,
    SummaryPage,
    TargetsIn,
    TargetsOut,
)
from app.engines.ranktracking.reports.summary import (
    MAX_SUMMARY_PAGE,
    SUMMARY_PAGE,
    summary_page,
)
from app.engines.ranktracking.reports.targets import set_targets
from app.engines.ranktracking.schedules import lookup
from app.web.api import (
    ranktracking_alerts,
    ranktracking_explain,
    ranktracking_keywords,
    ranktracking_local,
    ranktracking_share,
)
from app.web.api.common import RowId
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Paging, Reads, Writes, paging

# The values TableQuery.check() accepts, stated in the document (it answers 422 otherwise).
Device = Annotated[
    str | None,
    QueryParameter(
        description="``desktop`` or ``mobile``.", schema_extra={"enum": ["desktop", "mobile"]}
    ),
]
Moved = Annotated[
    int | None,
    QueryParameter(
        description="Rows that moved by at least this many places (new/lost count).",
        schema_extra={"minimum": 1, "maximum": 100},
    ),
]
Top = Annotated[
    int | None, QueryParameter(description="3, 10 or 100.", schema_extra={"enum": list(TOP_BANDS)})
]
Features = Annotated[
    str | None,
    QueryParameter(
        description="``owned``: a SERP feature of the tracked domain on the latest page; "
        "``winnable``: a feature it does not own while it ranks in the top 10.",
        schema_extra={"enum": ["owned", "winnable"]},
    ),
]
Tag = Annotated[
    str | None,
    QueryParameter(
        description="Only keywords carrying this tag (the figures above follow it).",
        max_length=100,
    ),
]
Sort = Annotated[str, QueryParameter(schema_extra={"enum": list(SORT_KEYS)})]
Order = Annotated[str, QueryParameter(schema_extra={"enum": ["asc", "desc"]})]
Columns = Annotated[
    int,
    QueryParameter(
        description="Measured runs shown.", schema_extra={"minimum": 1, "maximum": MAX_COLUMNS}
    ),
]


def table_query(
    device: str | None,
    moved: int | None,
    in_top: int | None,
    out_of_top: int | None,
    sort: str,
    order: str,
    columns: int,
    cursor: str | None,
    limit: int,
    q: str | None,
    features: str | None = None,
    url_issues: bool = False,
    tag: str | None = None,
) -> TableQuery:
    return TableQuery(
        device=device or None,
        moved=moved,
        in_top=in_top,
        out_of_top=out_of_top,
        sort=sort,
        order=order,
        columns=columns,
        cursor=cursor,
        limit=limit,
        search=" ".join(q.split()).casefold() if q else None,
        features=features or None,
        url_issues=url_issues,
        tag=tag or None,
    )


@get(
    "/schedules/{schedule_id:int}/positions",
    dependencies={"paging": paging(default=DEFAULT_LIMIT, maximum=MAX_LIMIT)},
)
async def get_positions(
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: RowId,
    paging: Paging,
    device: Device = None,
    moved: Moved = None,
    in_top: Top = None,
    out_of_top: Top = None,
    sort: Sort = "keyword",
    order: Order = "asc",
    columns: Columns = DEFAULT_COLUMNS,
    q: FromQuery[str | None] = None,
    features: Features = None,
    url_issues: FromQuery[bool] = False,
    tag: Tag = None,
) -> PositionsPage:
    """Keywords × the schedule's recent measured runs, one row per keyword and device, with the
    competitors' positions and the SERP features of the latest page."""
    query = table_query(
        device,
        moved,
        in_top,
        out_of_top,
        sort,
        order,
        columns,
        paging.cursor,
        paging.limit,
        q,
        features,
        url_issues,
        tag,
    )
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await positions_page(session, schedule, query)


@get(
    "/schedules/{schedule_id:int}/summary",
    dependencies={"paging": paging(default=SUMMARY_PAGE, maximum=MAX_SUMMARY_PAGE)},
)
async def get_summary(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId, paging: Paging, tag: Tag = None
) -> SummaryPage:
    """Average position and visibility of each measured run, newest request first; with a
    ``tag``, over the keywords carrying it."""
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await summary_page(session, schedule_id, paging.cursor, paging.limit, tag=tag or None)


def csv_response(text: str, filename: str) -> Response[str]:
    return Response(
        text,
        media_type="text/csv",  # Litestar adds "; charset=utf-8" to text types
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@get("/schedules/{schedule_id:int}/positions.csv", media_type="text/csv")
async def get_positions_csv(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    device: Device = None,
    moved: Moved = None,
    in_top: Top = None,
    out_of_top: Top = None,
    sort: Sort = "keyword",
    order: Order = "asc",
    columns: Columns = DEFAULT_COLUMNS,
    q: FromQuery[str | None] = None,
    features: Features = None,
    tag: Tag = None,
) -> Response[str]:
    """The positions table as CSV: every matching row; formula-like text cells neutralised."""
    query = table_query(
        device,
        moved,
        in_top,
        out_of_top,
        sort,
        order,
        columns,
        None,
        DEFAULT_LIMIT,
        q,
        features,
        tag=tag,
    )
    session = uow.session
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    page = await export.all_positions(session, schedule, query)
    await export.record_export(
        session, schedule_id, principal.workspace_id, "positions", clock.now()
    )
    location = await locations.shown(session, schedule.location_code)
    return csv_response(export.positions_csv(page, location), f"positions-{schedule_id}.csv")


@get("/schedules/{schedule_id:int}/log.csv", media_type="text/csv")
async def get_log_csv(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, schedule_id: RowId
) -> Response[str]:
    """Every child run of the schedule's log as CSV, newest request first."""
    session = uow.session
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    text = await export.log_csv(session, schedule_id)
    await export.record_export(session, schedule_id, principal.workspace_id, "log", clock.now())
    return csv_response(text, f"log-{schedule_id}.csv")


@put("/schedules/{schedule_id:int}/competitors")
async def put_competitors(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    data: JSONBody[CompetitorsIn],
) -> CompetitorsOut:
    """Replace the schedule's competitor domains (up to 5; from the next run on)."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    domains = await set_competitors(uow.session, schedule, data.domains, clock.now())
    return CompetitorsOut(schedule_id=schedule_id, domains=domains)


@put("/schedules/{schedule_id:int}/targets")
async def put_targets(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    data: JSONBody[TargetsIn],
) -> TargetsOut:
    """Replace the target URLs (keyword → the page of the tracked domain that should rank)."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    targets = await set_targets(uow.session, schedule, data.targets, clock.now())
    return TargetsOut(schedule_id=schedule_id, targets=targets)


@get("/schedules/{schedule_id:int}/competitors/summary")
async def get_competitors_summary(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId
) -> RivalsOut:
    """Who gained, who lost: the tracked domain and each competitor per device, visibility and
    average position of the latest measurement against the one before."""
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await who_gained(session, schedule)


@get("/balance/history")
async def get_balance_history(
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    days: Annotated[
        int, QueryParameter(ge=1, le=366, description="Days shown, today included.")
    ] = DAYS,
) -> BalanceChart:
    """The organisation's available balance at the end of each UTC day, from the ledger (a figure
    in EUR; the ledger keeps the exact amounts)."""
    return await balance_history(session, principal.organisation_id, clock.now(), days=days)


HANDLERS: list[Any] = [
    get_balance_history,
    put_targets,
    get_positions,
    get_summary,
    get_positions_csv,
    get_log_csv,
    put_competitors,
    get_competitors_summary,
    *ranktracking_alerts.HANDLERS,
    *ranktracking_explain.HANDLERS,
    *ranktracking_keywords.HANDLERS,
    *ranktracking_share.HANDLERS,
    *ranktracking_local.HANDLERS,
]
