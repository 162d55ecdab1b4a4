"""Where a schedule's keywords come from and how they are grouped, on the dashboard: the "Import
from Search Console" page (a property, a date range and a minimum of impressions; the queries
previewed with their clicks, impressions, CTR and average position; the chosen ones added,
optionally tagged, RT-68, RT-69) and the tag form of the positions table (RT-70).

The pages call the services the API calls. Google's answers a person can act on are said in
words: no key stored (with a link to the secrets page), Google refusing the key or the property,
Google failing or not answering in time; none of them writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from app.engines.ranktracking import search_console, tags
from app.engines.ranktracking.errors import (
    SearchConsoleNotConfigured,
    SearchConsoleRefused,
    SearchConsoleUnavailable,
)
from app.engines.ranktracking.models import ARCHIVED
from app.engines.ranktracking.schedules import lookup
from app.engines.ranktracking.schemas import (
    SearchConsolePreviewIn,
    SearchConsolePreviewOut,
    SearchConsolePropertyOut,
)
from app.engines.ranktracking.wording import counted
from app.errors import DomainError, NotFound, ValidationFailed
from app.integrations.sheets.service_account import SERVICE_ACCOUNT_SECRET
from app.web.api.ranktracking_keywords import google_of
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.common import error_messages, page
from app.web.dashboard.ranktracking_reports import TableParams
from app.web.deps import CurrentClock, CurrentSettings, Reads, Writes

SCHEDULES = "/ui/ranktracking/schedules"
SECRETS_PAGE = "/ui/workspace/secrets"
DEFAULT_DAYS = 28
FINAL_LAG_DAYS = 2
"""Google completes a day's figures about two days later: the default range ends there."""

FIELD_LABELS = {
    "site_url": "Property",
    "start_date": "From",
    "end_date": "To",
    "min_impressions": "Minimum impressions",
    "data_state": "Data",
    "keywords": "Queries",
    "tag": "Tag",
}


@dataclass(frozen=True, slots=True)
class Problem:
    """Why Google could not be read, as the page says it (``kind``: ``not_configured``,
    ``refused`` or ``unavailable``)."""

    kind: str
    message: str


def problem_of(exc: DomainError) -> Problem | None:
    if isinstance(exc, SearchConsoleNotConfigured):
        return Problem("not_configured", exc.message)
    if isinstance(exc, SearchConsoleRefused):
        return Problem("refused", exc.message)
    if isinstance(exc, SearchConsoleUnavailable):
        return Problem("unavailable", exc.message)
    return None


_EXPECTED = {
    "start_date": "a date as YYYY-MM-DD",
    "end_date": "a date as YYYY-MM-DD",
    "min_impressions": "a whole number, 0 or more",
}


@dataclass(frozen=True, slots=True)
class PreviewParams:
    """The import form's values as the browser sends them (all text)."""

    site_url: str = ""
    start_date: str = ""
    end_date: str = ""
    min_impressions: str = ""
    data_state: str = ""

    def with_defaults(self, today: date) -> PreviewParams:
        end = today - timedelta(days=FINAL_LAG_DAYS)
        return PreviewParams(
            site_url=self.site_url.strip(),
            start_date=self.start_date.strip()
            or (end - timedelta(days=DEFAULT_DAYS - 1)).isoformat(),
            end_date=self.end_date.strip() or end.isoformat(),
            min_impressions=self.min_impressions.strip(),
            data_state=self.data_state if self.data_state == "all" else "final",
        )

    def request(self) -> SearchConsolePreviewIn:
        """The API's request struct, checked like the API checks it (a 422 naming the field)."""
        raw = self.min_impressions or "0"
        if not raw.isdigit():
            raise ValidationFailed.field("min_impressions", "a whole number, 0 or more")
        try:
            return msgspec.convert(
                {
                    "site_url": self.site_url,
                    "start_date": self.start_date,
                    "end_date": self.end_date,
                    "min_impressions": int(raw),
                    "data_state": self.data_state,
                },
                SearchConsolePreviewIn,
            )
        except msgspec.ValidationError as exc:
            field = str(exc).rpartition("$.")[2].rstrip("`")
            raise ValidationFailed.field(
                field, _EXPECTED.get(field, "a property from the list")
            ) from None

    def query_string(self) -> str:
        return urlencode(
            {name: getattr(self, name) for name in self.__dataclass_fields__ if getattr(self, name)}
        )


@get(f"{SCHEDULES}/{{schedule_id:int}}/search-console")
async def import_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    session: Reads,
    clock: CurrentClock,
    settings: CurrentSettings,
    schedule_id: FromPath[int],
    site_url: FromQuery[str] = "",
    start_date: FromQuery[str] = "",
    end_date: FromQuery[str] = "",
    min_impressions: FromQuery[str] = "",
    data_state: FromQuery[str] = "",
    notice: FromQuery[str | None] = None,
) -> Template:
    """The property list (from Google), the range form and, once a property is chosen, the
    preview of its queries with a checkbox each (those not tracked yet ticked)."""
    now = clock.now()
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    params = PreviewParams(site_url, start_date, end_date, min_impressions, data_state)
    params = params.with_defaults(now.date())
    google = google_of(runtime)
    problem: Problem | None = None
    errors: list[str] = []
    properties: list[SearchConsolePropertyOut] = []
    preview: SearchConsolePreviewOut | None = None
    try:
        properties = await search_console.properties(session, google, principal.workspace_id)
    except DomainError as exc:
        if (problem := problem_of(exc)) is None:
            raise
    if params.site_url and (problem is None or problem.kind == "refused"):
        # A refused listing may still read a property shared with the account (Google lists
        # only what it lists); the preview says what Google answers for this one.
        try:
            preview = await search_console.preview(
                session, google, schedule, params.request(), settings.ranktracking, now
            )
            problem = None
        except DomainError as exc:
            problem = problem_of(exc)
            if problem is None:
                errors = error_messages(exc, FIELD_LABELS)
    tag_names = await tags.schedule_tags(session, schedule_id)
    return page(
        request,
        "ranktracking/search_console.html",
        principal,
        schedule=schedule,
        editable=schedule.status != ARCHIVED,
        params=params,
        properties=properties,
        preview=preview,
        problem=problem,
        errors=errors,
        notice=notice,
        secrets_page=SECRETS_PAGE,
        secret_name=SERVICE_ACCOUNT_SECRET,
        tag_names=[t.tag for t in tag_names.tags],
        untracked=sum(1 for q in preview.queries if not q.tracked) if preview else 0,
    )


def _form_values(form: Any, name: str) -> list[str]:
    return [str(v) for v in form.getall(name)] if name in form else []


@post(f"{SCHEDULES}/{{schedule_id:int}}/search-console")
async def add_from_search_console(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    schedule_id: FromPath[int],
) -> Redirect:
    """Add the ticked queries to the schedule's keywords, then back to its page saying what was
    added; a refusal goes back to the preview with the reason."""
    form = await request.form()
    chosen = _form_values(form, "keyword")
    tag = str(form.get("tag") or "").strip() or None
    back = PreviewParams(**{n: str(form.get(n) or "") for n in PreviewParams.__dataclass_fields__})
    try:
        if not chosen:
            raise ValidationFailed.field("keywords", "tick at least one query to add")
        if len(chosen) > 5000:
            raise ValidationFailed.field("keywords", "at most 5,000 queries at once")
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            report = await search_console.add_to_schedule(
                uow.session, settings.ranktracking, schedule, chosen, tag, clock.now()
            )
    except NotFound:
        raise
    except DomainError as exc:
        text = "; ".join(error_messages(exc, FIELD_LABELS))
        query = back.query_string()
        return Redirect(
            f"{SCHEDULES}/{schedule_id}/search-console?{query}&notice={quote(text)}",
            status_code=303,
        )
    text = f"Added {counted(len(report.added), 'keyword')} from Search Console"
    if report.tag:
        text += f", tagged “{report.tag}”"
    if report.skipped_existing:
        text += f"; {len(report.skipped_existing)} already tracked"
    if report.invalid:
        text += f"; {len(report.invalid)} not usable as keywords"
    return Redirect(f"{SCHEDULES}/{schedule_id}?notice={quote(text)}", status_code=303)


def table_query(back: str) -> str:
    """The positions table's query string to return to, keeping only its own parameters (never
    an address of the form's choosing)."""
    known = set(TableParams.__dataclass_fields__)
    pairs = [(k, v) for k, v in parse_qsl(back.lstrip("?")) if k in known and v]
    return urlencode(pairs)


@post(f"{SCHEDULES}/{{schedule_id:int}}/tags")
async def change_tags(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
) -> Redirect:
    """Put a tag on the ticked keywords of the positions table, or take it off; back to the
    table with its filters."""
    form = await request.form()
    chosen = _form_values(form, "keyword")
    raw_tag = str(form.get("tag") or "")
    remove = form.get("change") == "remove"
    try:
        if not chosen:
            raise ValidationFailed.field("keywords", "tick at least one keyword of the table")
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            if remove:
                change = await tags.remove_tag(uow.session, schedule, raw_tag, chosen)
            else:
                change = await tags.add_tag(uow.session, schedule, raw_tag, chosen, clock.now())
        verb = "removed from" if remove else "added to"
        text = f"Tag “{change.tag}” {verb} {counted(len(change.changed), 'keyword')}"
        if change.unchanged:
            state = "did not have it" if remove else "had it already"
            text += f"; {len(change.unchanged)} {state}"
    except NotFound:
        raise
    except DomainError as exc:
        text = "; ".join(error_messages(exc, FIELD_LABELS))
    query = table_query(str(form.get("back") or ""))
    sep = "&" if query else ""
    return Redirect(
        f"{SCHEDULES}/{schedule_id}?{query}{sep}notice={quote(text)}#rt-positions",
        status_code=303,
    )


ROUTES: list[Any] = [import_page, add_from_search_console, change_tags]
