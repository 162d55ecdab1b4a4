"""Position tracking dashboard pages under ``/ui/ranktracking``: schedules with their status and next
due time (or "retrying"), the creation wizard with its live estimate, each schedule's log with a
health chart, results with position over time; and every rank-tracking page this engine adds
(keyword lists in :mod:`.ranktracking_lists`, the balance in :mod:`.ranktracking_money`, the
wizard's form in :mod:`.ranktracking_forms`, the rest in their own modules).

Pages call the same services as the API. A form that breaks a rule is shown again with the message.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, QueryParameter, URLEncodedBody
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.ranktracking import lists as list_service
from app.engines.ranktracking import locations, money, tags
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.keywords import normalise
from app.engines.ranktracking.models import ARCHIVED, Schedule
from app.engines.ranktracking.records.log import schedule_log
from app.engines.ranktracking.records.results import keyword_history, latest_results
from app.engines.ranktracking.records.schedules import schedule_out
from app.engines.ranktracking.reports.charts import (
    ChartOut,
    keyword_chart,
    schedule_charts,
    tag_charts,
)
from app.engines.ranktracking.reports.positions import TableQuery, positions_page
from app.engines.ranktracking.reports.schemas import PositionsPage
from app.engines.ranktracking.schedules import (
    creation,
    drafts,
    estimates,
    lifecycle,
    lookup,
    manual_runs,
)
from app.engines.ranktracking.schedules.rules import PROVIDER_LANGUAGES
from app.engines.ranktracking.schemas import KeywordTagsOut
from app.engines.ranktracking.wording import counted
from app.errors import DomainError
from app.pagination import cursor_number
from app.platform.service import Principal
from app.web.auth import (
    CurrentPrincipal,
    CurrentRuntime,
)
from app.web.dashboard import ranktracking_alerts as alerts_ui
from app.web.dashboard import ranktracking_explain as explain_ui
from app.web.dashboard import ranktracking_keywords as keywords_ui
from app.web.dashboard import ranktracking_lists as lists_ui
from app.web.dashboard import ranktracking_live as live_ui
from app.web.dashboard import ranktracking_local as local_ui
from app.web.dashboard import ranktracking_locations as locations_ui
from app.web.dashboard import ranktracking_money as money_ui
from app.web.dashboard import ranktracking_reports as reports_ui
from app.web.dashboard import ranktracking_share as share_ui
from app.web.dashboard.common import page
from app.web.dashboard.ranktracking_forms import (
    ScheduleForm,
    checked,
    error_text,
    field_errors,
    int_of,
    located,
    schedule_in,
)
from app.web.deps import CurrentClock, CurrentSettings, Reads, Writes

PREFIX = "/ui/ranktracking"


class RunForm(msgspec.Struct, kw_only=True):
    queue: str = "standard"


# -- schedules ------------------------------------------------------------------------------------


@get(PREFIX)
async def overview(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    settings: CurrentSettings,
) -> Template:
    now = clock.now()
    rows = await lookup.list_schedules(session, principal.workspace_id)
    items = [await schedule_out(session, s, now) for s in rows]
    balance = await money.balance_out(session, principal.organisation_id)
    return page(
        request,
        "ranktracking/overview.html",
        principal,
        schedules=items,
        balance=balance,
        limit=settings.ranktracking.max_active_schedules,
    )


async def _wizard(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    form: ScheduleForm,
    errors: list[str] | None = None,
    field_errors: dict[str, str] | None = None,
) -> Template:
    keyword_lists = await list_service.all_lists(session, principal.workspace_id)
    return page(
        request,
        "ranktracking/wizard.html",
        principal,
        form=form,
        lists=keyword_lists,
        errors=errors or [],
        field_errors=field_errors or {},
        # The countries to start with; typing asks /ui/ranktracking/partials/locations for the rest.
        locations=locations.countries(),
        location_name=await locations.name_of(session, int_of(form.location_code)),
        languages=sorted(PROVIDER_LANGUAGES),
    )


@get(f"{PREFIX}/new")
async def wizard(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    mobile_of: FromQuery[int | None] = None,
) -> Template:
    form = ScheduleForm(device_desktop="on")
    if mobile_of is not None:
        # RT-17: "duplicate for mobile" opens the wizard pre-filled; the source is untouched.
        source = await lookup.get_schedule(session, principal.workspace_id, mobile_of)
        draft = drafts.mobile_draft(source)
        form = ScheduleForm(
            name=draft.name,
            data_type="serp",
            frequency=draft.frequency,
            source="list" if draft.list_id is not None else "selection",
            list_id=str(draft.list_id or ""),
            keywords="\n".join(draft.keywords or []),
            depth=draft.depth or "top10",
            location_code=str(draft.location_code or ""),
            language_code=draft.language_code or "",
            domain=draft.domain or "",
            device_mobile="on",
            monthly_cap_eur=str(draft.monthly_cap_eur or ""),
        )
    return await _wizard(request, principal, session, form)


@post(f"{PREFIX}/estimate")
async def live_estimate(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    data: URLEncodedBody[ScheduleForm],
) -> Template:
    """The wizard's live estimate (an htmx fragment)."""
    estimate = None
    errors: list[str] = []
    try:
        estimate = await estimates.estimate_new(
            session,
            settings.ranktracking,
            principal,
            schedule_in(await located(session, checked(data))),
        )
    except DomainError as exc:
        errors = error_text(exc)
    return page(request, "ranktracking/_estimate.html", principal, estimate=estimate, errors=errors)


@post(f"{PREFIX}/new")
async def create_schedule(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    data: URLEncodedBody[ScheduleForm],
) -> Template | Redirect:
    # The engine's deps: creating a schedule commits it before its baseline is launched.
    try:
        form = await located(session, checked(data))
        schedule, launch = await creation.create_and_baseline(
            RankTrackingDeps.of(runtime), principal, schedule_in(form)
        )
    except DomainError as exc:
        tpl = await _wizard(request, principal, session, data, error_text(exc), field_errors(exc))
        tpl.status_code = 422
        return tpl
    outcome = (
        f"Baseline: {counted(launch.launched, 'child run')} launched"
        if launch.launched
        else f"Baseline not launched ({launch.code}): {launch.message}"
    )
    return Redirect(f"{PREFIX}/schedules/{schedule.id}?notice={quote(outcome)}")


LATEST_ROWS = 100
"""Keyword-data results shown on the schedule page (the rest: the results API)."""


async def _positions_table(
    session: ReadSession, schedule: Schedule, tparams: reports_ui.TableParams
) -> tuple[PositionsPage, reports_ui.TableParams, list[str]]:
    """The positions table as the address asks for it, with the parameters it was built from
    and what was wrong with the address (a hand-edited one: then the unfiltered table)."""
    try:
        return await positions_page(session, schedule, tparams.query()), tparams, []
    except DomainError as exc:
        table = await positions_page(session, schedule, TableQuery(limit=reports_ui.PAGE_ROWS))
        return table, reports_ui.TableParams(), error_text(exc)


async def _trends(
    session: ReadSession, schedule: Schedule, schedule_tags: KeywordTagsOut, tag: str
) -> tuple[list[ChartOut], list[ChartOut]]:
    """A SERP schedule's trend charts and one per tag (keyword data has none)."""
    if schedule.data_type != "serp":
        return [], []
    # With a tag chosen, the trends follow the table: that tag's keywords only (RT-71).
    shown_tag = tags.checked_tag(tag) if tag else None
    charts = await schedule_charts(session, schedule.id, tag=shown_tag)
    by_tag: list[ChartOut] = []
    if schedule_tags.tags:
        by_tag = await tag_charts(session, schedule.id, [t.tag for t in schedule_tags.tags])
    return charts, by_tag


@get(f"{PREFIX}/schedules/{{schedule_id:int}}")
async def schedule_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    cursor: FromQuery[str | None] = None,
    notice: FromQuery[str | None] = None,
    device: FromQuery[str] = "",
    moved: FromQuery[str] = "",
    band: FromQuery[str] = "",
    q: FromQuery[str] = "",
    sort: FromQuery[str] = "keyword",
    order: FromQuery[str] = "asc",
    columns: FromQuery[str] = "",
    features: FromQuery[str] = "",
    url_issues: FromQuery[str] = "",
    tag: FromQuery[str] = "",
    page_at: Annotated[str, QueryParameter(name="page")] = "",
) -> Template:
    now = clock.now()
    tparams = reports_ui.TableParams(
        features=features,
        url_issues=url_issues,
        tag=tag,
        device=device,
        moved=moved,
        band=band,
        q=q,
        sort=sort,
        order=order,
        columns=columns,
        page=page_at,
    )
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    out = await schedule_out(session, schedule, now)
    log = await schedule_log(session, schedule_id, before_id=cursor_number(cursor))
    # A SERP schedule's latest results are the paged table; keyword data has no table.
    results = await latest_results(session, schedule_id) if schedule.data_type != "serp" else []
    table, tparams, table_errors = await _positions_table(session, schedule, tparams)
    schedule_tags = await tags.schedule_tags(session, schedule_id)
    charts, by_tag = await _trends(session, schedule, schedule_tags, tparams.tag)
    feed = await money.activity_page(
        session, principal.workspace_id, None, schedule_id=schedule_id, limit=20
    )
    extras = await alerts_ui.schedule_extras(session, schedule)
    extras |= await share_ui.share_context(session, schedule, now)
    discovered = await explain_ui.schedule_discovery(session, schedule)
    return page(
        request,
        "ranktracking/schedule.html",
        principal,
        schedule=out,
        target_urls=dict(schedule.target_urls or {}),
        log=log,
        live=cursor is None,
        results=results[:LATEST_ROWS],
        results_total=len(results),
        discovered=discovered,
        feed=feed.items,
        notice=notice,
        table=table,
        charts=[msgspec.to_builtins(c) for c in charts],
        tag_charts=[msgspec.to_builtins(c) for c in by_tag],
        tags=schedule_tags,
        editable=schedule.status != ARCHIVED,
        tparams=tparams,
        table_errors=table_errors,
        bands=reports_ui.BANDS,
        feature_filters=reports_ui.FEATURE_FILTERS,
        summaries=reports_ui.summary_rows(table),
        **extras,
    )


@post(f"{PREFIX}/schedules/{{schedule_id:int}}/run")
async def run_now(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    schedule_id: FromPath[int],
    data: URLEncodedBody[RunForm],
) -> Redirect:
    queue = "priority" if data.queue == "priority" else "standard"
    try:
        launch = await manual_runs.run_now(
            RankTrackingDeps.of(runtime), principal, schedule_id, queue
        )
        text = (
            f"{counted(launch.launched, 'child run')} launched"
            if launch.launched
            else f"Nothing launched ({launch.code}): {launch.message}"
        )
    except DomainError as exc:
        text = "; ".join(error_text(exc))
    return Redirect(f"{PREFIX}/schedules/{schedule_id}?notice={quote(text)}")


def _transition(action: Any, path: str, label: str) -> Any:
    @post(f"{PREFIX}/schedules/{{schedule_id:int}}/{path}", name=f"ranktracking_{path}")
    async def handler(
        principal: CurrentPrincipal,
        uow: Writes,
        clock: CurrentClock,
        schedule_id: FromPath[int],
        data: URLEncodedBody[RunForm],
    ) -> Redirect:
        try:
            async with uow.attempt():
                schedule = await lookup.lock_schedule(
                    uow.session, principal.workspace_id, schedule_id
                )
                await action(uow.session, schedule, clock.now())
            text = label
        except DomainError as exc:
            text = exc.message
        return Redirect(f"{PREFIX}/schedules/{schedule_id}?notice={quote(text)}")

    return handler


pause = _transition(lifecycle.pause, "pause", "Paused; active runs cancelled")
resume = _transition(lifecycle.resume, "resume", "Resumed; due at the next hourly sweep")
end = _transition(lifecycle.end, "end", "Ended")


@get(f"{PREFIX}/schedules/{{schedule_id:int}}/keyword")
async def keyword_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: FromPath[int],
    keyword: FromQuery[str],
    notice: FromQuery[str | None] = None,
) -> Template:
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    history = await keyword_history(session, schedule_id, normalise(keyword))
    chart = await keyword_chart(
        session, schedule_id, normalise(keyword), list(schedule.competitors or [])
    )
    return page(
        request,
        "ranktracking/keyword.html",
        principal,
        schedule=schedule,
        location_name=await locations.name_of(session, schedule.location_code),
        history=history,
        depth=schedule.depth or 100,
        chart=msgspec.to_builtins(chart),
        notice=notice,
        **await explain_ui.keyword_extras(session, schedule, normalise(keyword)),
    )


NAV: list[tuple[str, str]] = [(PREFIX, "Position tracking")]
"""(href, label) links this engine adds to the navigation bar."""

ROUTES: list[Any] = [
    overview,
    wizard,
    live_estimate,
    create_schedule,
    schedule_page,
    run_now,
    pause,
    resume,
    end,
    keyword_page,
    *lists_ui.ROUTES,
    *money_ui.ROUTES,
    *reports_ui.ROUTES,
    *alerts_ui.ROUTES,
    *explain_ui.ROUTES,
    *keywords_ui.ROUTES,
    *locations_ui.ROUTES,
    *local_ui.ROUTES,
    *live_ui.ROUTES,
    *share_ui.ROUTES,
]
"""Page handlers; they receive ``principal`` (signed-in person) and the request's dependencies
(:mod:`app.web.deps`)."""

PUBLIC_ROUTES: list[Any] = [*share_ui.PUBLIC_ROUTES]
"""Handlers reachable without signing in: the page a shared report link opens."""
