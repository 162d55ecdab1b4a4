"""Position tracking dashboard pages under ``/ui/ranktracking``: schedules with their status and next
due time (or "retrying"), the creation wizard with its live estimate, each schedule's log with a
health chart, results with position over time, keyword lists, and the organisation balance with its
ledger and the activity feed.

Pages call the same services as the API. A form that breaks a rule is shown again with the message.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, QueryParameter, URLEncodedBody
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.ranktracking import amounts, locations, money, tags
from app.engines.ranktracking import lists as list_service
from app.engines.ranktracking.balance_history import balance_history
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.keywords import normalise, parse_import
from app.engines.ranktracking.models import ARCHIVED
from app.engines.ranktracking.records.log import schedule_log
from app.engines.ranktracking.records.results import keyword_history, latest_results
from app.engines.ranktracking.records.schedules import schedule_out
from app.engines.ranktracking.reports.charts import keyword_chart, schedule_charts, tag_charts
from app.engines.ranktracking.reports.positions import TableQuery, positions_page
from app.engines.ranktracking.schedules import (
    creation,
    drafts,
    estimates,
    lifecycle,
    lookup,
    manual_runs,
)
from app.engines.ranktracking.schedules.rules import PROVIDER_LANGUAGES
from app.engines.ranktracking.schemas import RankScheduleIn
from app.engines.ranktracking.wording import counted
from app.errors import DomainError, ValidationFailed
from app.pagination import cursor_number
from app.platform.service import Principal
from app.web.auth import (
    CurrentPrincipal,
    CurrentRuntime,
    require_organisation_manager,
)
from app.web.dashboard import ranktracking_alerts as alerts_ui
from app.web.dashboard import ranktracking_explain as explain_ui
from app.web.dashboard import ranktracking_keywords as keywords_ui
from app.web.dashboard import ranktracking_live as live_ui
from app.web.dashboard import ranktracking_local as local_ui
from app.web.dashboard import ranktracking_locations as locations_ui
from app.web.dashboard import ranktracking_reports as reports_ui
from app.web.dashboard import ranktracking_share as share_ui
from app.web.dashboard.common import error_messages, page
from app.web.dashboard.ranktracking_labels import CHOICES, FIELD_LABELS, NAME_MAX, input_of
from app.web.deps import CurrentClock, CurrentSettings, Reads, Writes
from app.web.plain_errors import plain_error

PREFIX = "/ui/ranktracking"


class ScheduleForm(msgspec.Struct, kw_only=True):
    """The wizard's fields as the browser posts them (all text; checkboxes "on" or absent).
    Unknown fields (the CSRF token) are ignored."""

    name: str = ""
    data_type: str = "serp"
    frequency: str = "weekly"
    source: str = "list"
    list_id: str = ""
    keywords: str = ""
    depth: str = "top10"
    location_code: str = "2840"
    language_code: str = "en"
    domain: str = ""
    device_desktop: str = ""
    device_mobile: str = ""
    package_volume: str = ""
    package_cpc: str = ""
    package_trends: str = ""
    monthly_cap_eur: str = ""


class ListForm(msgspec.Struct, kw_only=True):
    name: str = ""
    keywords: str = ""
    format: str = "text"


class RunForm(msgspec.Struct, kw_only=True):
    queue: str = "standard"


class TopUpForm(msgspec.Struct, kw_only=True):
    amount_eur: str = ""


def _int(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None


def _decimal(value: str) -> Decimal | None:
    if not value.strip():
        return None
    try:
        return Decimal(value.strip().replace(",", "."))
    except InvalidOperation:
        return Decimal("NaN")


def schedule_in(form: ScheduleForm) -> RankScheduleIn:
    """The wizard's form as the API's request struct (the services check every rule)."""
    serp = form.data_type == "serp"
    devices: list[Any] = [d for d in ("desktop", "mobile") if getattr(form, f"device_{d}")]
    packages: list[Any] = [p for p in ("volume", "cpc", "trends") if getattr(form, f"package_{p}")]
    use_list = form.source == "list"
    return RankScheduleIn(
        name=form.name,
        data_type=form.data_type if form.data_type in ("serp", "keyword_data") else "serp",  # type: ignore[arg-type]
        frequency=form.frequency  # type: ignore[arg-type]
        if form.frequency in ("daily", "weekly", "biweekly", "monthly", "quarterly")
        else "weekly",
        list_id=_int(form.list_id) if use_list else None,
        keywords=None if use_list else parse_import(form.keywords),
        depth=(form.depth if form.depth in ("top10", "top100") else None) if serp else None,  # type: ignore[arg-type]
        location_code=_int(form.location_code),
        language_code=form.language_code.strip() or None,
        domain=form.domain.strip() or None if serp else None,
        devices=devices if serp else None,
        packages=packages if not serp else None,
        monthly_cap_eur=_decimal(form.monthly_cap_eur),
    )


async def located(session: ReadSession, form: ScheduleForm) -> ScheduleForm:
    """The form with its location as a code: a name typed instead of picking from the list is
    resolved, or a clear error on the field says there is none or which ones it could be."""
    if form.data_type != "serp":
        return form
    code = await locations.resolve(session, form.location_code)
    return msgspec.structs.replace(form, location_code=str(code))


def _error_text(exc: DomainError) -> list[str]:
    return error_messages(exc, FIELD_LABELS)


def _field_errors(exc: DomainError) -> dict[str, str]:
    """Each refused field's message, keyed by the wizard input it is shown next to."""
    shown: dict[str, str] = {}
    for detail in exc.details or []:
        if isinstance(detail, dict) and detail.get("field"):
            field = str(detail["field"])
            text = plain_error(field, str(detail.get("message") or exc.message), FIELD_LABELS)
            shown.setdefault(input_of(field), text)
    return shown


def wizard_problems(form: ScheduleForm) -> list[dict[str, str]]:
    """What the wizard itself refuses before the services see the schedule: a choice it never
    offered (the form would otherwise fall back to a default without a word), a name too long,
    a keyword list not chosen."""
    found: list[dict[str, str]] = []
    for name, options in CHOICES.items():
        if getattr(form, name) not in options:
            listed = list(options.values())
            said = ", ".join(listed[:-1]) + " or " + listed[-1]
            found.append({"field": name, "message": f"choose {said}", "code": "invalid"})
    if len(form.name) > NAME_MAX:
        found.append(
            {"field": "name", "message": f"enter at most {NAME_MAX} characters", "code": "invalid"}
        )
    if form.source == "list" and _int(form.list_id) is None:
        found.append(
            {"field": "list_id", "message": "choose one of your keyword lists", "code": "required"}
        )
    return found


def checked(form: ScheduleForm) -> ScheduleForm:
    """The form, once the wizard's own checks pass (else 422 naming each field)."""
    if found := wizard_problems(form):
        raise ValidationFailed(found[0]["field"] + ": " + found[0]["message"], details=found)
    return form


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
        location_name=await locations.name_of(session, _int(form.location_code)),
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
        errors = _error_text(exc)
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
        tpl = await _wizard(request, principal, session, data, _error_text(exc), _field_errors(exc))
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
    table_errors: list[str] = []
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    out = await schedule_out(session, schedule, now)
    log = await schedule_log(session, schedule_id, before_id=cursor_number(cursor))
    # A SERP schedule's latest results are the paged table; keyword data has no table.
    results = await latest_results(session, schedule_id) if schedule.data_type != "serp" else []
    try:
        table = await positions_page(session, schedule, tparams.query())
    except DomainError as exc:
        # A hand-edited address: say what was wrong and show the unfiltered table.
        table_errors = _error_text(exc)
        tparams = reports_ui.TableParams()
        table = await positions_page(session, schedule, TableQuery(limit=reports_ui.PAGE_ROWS))
    schedule_tags = await tags.schedule_tags(session, schedule_id)
    charts, by_tag = [], []
    if schedule.data_type == "serp":
        # With a tag chosen, the trends follow the table: that tag's keywords only (RT-71).
        shown_tag = tags.checked_tag(tparams.tag) if tparams.tag else None
        charts = await schedule_charts(session, schedule_id, tag=shown_tag)
        if schedule_tags.tags:
            by_tag = await tag_charts(session, schedule_id, [t.tag for t in schedule_tags.tags])
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
        text = "; ".join(_error_text(exc))
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


# -- keyword lists ---------------------------------------------------------------------------------


@get(f"{PREFIX}/lists")
async def lists_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    items = await list_service.all_lists(session, principal.workspace_id)
    return page(request, "ranktracking/lists.html", principal, lists=items, errors=[])


@post(f"{PREFIX}/lists")
async def create_list(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    data: URLEncodedBody[ListForm],
) -> Template | Redirect:
    try:
        if not data.name.strip():
            raise DomainError("Name: a list needs a name")
        async with uow.attempt():
            kl, _ = await list_service.create_list(
                uow.session,
                workspace_id=principal.workspace_id,
                name=data.name,
                keywords=parse_import(data.keywords),
                now=clock.now(),
            )
    except DomainError as exc:
        items = await list_service.all_lists(uow.session, principal.workspace_id)
        tpl = page(
            request,
            "ranktracking/lists.html",
            principal,
            lists=items,
            errors=_error_text(exc),
            form=data,
        )
        tpl.status_code = 422
        return tpl
    return Redirect(f"{PREFIX}/lists/{kl.id}")


@get(f"{PREFIX}/lists/{{list_id:int}}")
async def list_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    list_id: FromPath[int],
    notice: FromQuery[str | None] = None,
) -> Template:
    kl = await list_service.get_list(session, principal.workspace_id, list_id)
    detail = await list_service.detail_out(session, kl)
    return page(request, "ranktracking/list.html", principal, kl=detail, notice=notice)


@post(f"{PREFIX}/lists/{{list_id:int}}/keywords")
async def add_to_list(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    list_id: FromPath[int],
    data: URLEncodedBody[ListForm],
) -> Redirect:
    fmt = "csv" if data.format == "csv" else "text"
    try:
        async with uow.attempt():
            kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
            report = await list_service.add_keywords(
                uow.session, kl, parse_import(data.keywords, fmt=fmt), now=clock.now()
            )
        text = (
            f"Added {len(report.added)}; skipped {len(report.skipped_existing)} already in the list"
        )
        if report.skipped_duplicates:
            text += f" and {len(report.skipped_duplicates)} repeated"
    except DomainError as exc:
        text = exc.message
    return Redirect(f"{PREFIX}/lists/{list_id}?notice={quote(text)}")


# -- money ----------------------------------------------------------------------------------------


@get(f"{PREFIX}/balance")
async def balance_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    cursor: FromQuery[str | None] = None,
    notice: FromQuery[str | None] = None,
) -> Template:
    balance = await money.balance_out(session, principal.organisation_id)
    entries = await money.ledger_page(session, principal.organisation_id, cursor)
    feed = await money.activity_page(session, principal.workspace_id, None, limit=30)
    history = await balance_history(session, principal.organisation_id, clock.now())
    return page(
        request,
        "ranktracking/balance.html",
        principal,
        balance=balance,
        history=msgspec.to_builtins(history),
        ledger=entries,
        feed=feed.items,
        notice=notice,
        eur_up=amounts.eur_up,
        eur_down=amounts.eur_down,
        exact_eur=amounts.exact_eur,
    )


@post(f"{PREFIX}/balance/top-ups")
async def top_up(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, data: URLEncodedBody[TopUpForm]
) -> Redirect:
    require_organisation_manager(principal)
    amount = _decimal(data.amount_eur) or Decimal(0)
    try:
        async with uow.attempt():
            await money.top_up(
                uow.session,
                organisation_id=principal.organisation_id,
                workspace_id=principal.workspace_id,
                amount_eur=amount,
                note="dashboard top-up",
                now=clock.now(),
            )
        text = f"Added {amount} EUR"
    except DomainError as exc:
        text = exc.message
    return Redirect(f"{PREFIX}/balance?notice={quote(text)}")


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
    lists_page,
    create_list,
    list_page,
    add_to_list,
    balance_page,
    top_up,
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
