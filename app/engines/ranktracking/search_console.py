"""Keywords from Google Search Console (RT-68, RT-69): the properties the workspace's service
account can read, a preview of a property's search queries over a date range with their clicks,
impressions, CTR and average position, and the chosen ones added to a schedule's keywords.

The service account is the workspace's one Google key (the secret Sheets custom metrics use too),
its tokens minted for the read-only Search Console scope by the process's shared minter. Google
refusing the key or the property is the workspace's to fix (a 422 saying what Google said); the
API failing, timing out or answering garbage is a 502; neither writes anything.

Adding goes where the schedule's keywords live: the linked list (whose other schedules see the
new members at their next request, RT-4), or the direct selection (within its limit, RT-3).
Keywords the schedule measures already are skipped and reported, never doubled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking import lists, tags
from app.engines.ranktracking.errors import (
    ScheduleStateConflict,
    SearchConsoleNotConfigured,
    SearchConsoleRefused,
    SearchConsoleUnavailable,
)
from app.engines.ranktracking.keywords import normalise, normalise_all
from app.engines.ranktracking.members import resolve
from app.engines.ranktracking.models import ARCHIVED, Schedule
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.schedules import edits
from app.engines.ranktracking.schemas import (
    SearchConsoleAddOut,
    SearchConsolePreviewIn,
    SearchConsolePreviewOut,
    SearchConsolePropertyOut,
    SearchConsoleQueryOut,
)
from app.errors import ValidationFailed
from app.integrations.search_console import SCOPE, SearchConsoleClient, SearchConsoleError
from app.integrations.sheets import ServiceAccount, SheetsError, TokenMinter
from app.integrations.sheets.service_account import SERVICE_ACCOUNT_SECRET, parse_key
from app.platform.crypto import SecretBox
from app.platform.service import get_secret
from app.settings import RankTrackingSettings

PREVIEW_ROWS = 5_000
"""The most-clicked queries a preview reads (Google sorts by clicks)."""
HISTORY = timedelta(days=16 * 31)
"""Search Console keeps 16 months of data; an older start is refused rather than read empty."""
MEMBER_LIMIT = 100_000
_REFUSALS = (400, 401, 403, 404)
"""Google's answers that mean the key or its access to the property is wrong, not an outage."""


@dataclass(frozen=True, slots=True)
class Google:
    """What a Search Console read needs from the process."""

    client: SearchConsoleClient
    minter: TokenMinter
    secrets: SecretBox


async def _credentials(session: ReadSession, google: Google, workspace_id: int) -> ServiceAccount:
    key = await get_secret(
        session, google.secrets, workspace_id=workspace_id, name=SERVICE_ACCOUNT_SECRET
    )
    if not key:
        raise SearchConsoleNotConfigured(
            f"no service-account key is stored: set the workspace secret {SERVICE_ACCOUNT_SECRET} "
            "to the JSON key of a service account added as a user of the property"
        )
    try:
        parse_key(key)
    except SheetsError as exc:
        raise SearchConsoleRefused(
            f"the stored service-account key cannot be used: {exc.message}"
        ) from None
    return ServiceAccount(key, google.minter, scope=SCOPE)


def _domain_error(exc: SearchConsoleError) -> Exception:
    if exc.status in _REFUSALS:
        return SearchConsoleRefused(f"Google Search Console refused the request: {exc.message}")
    return SearchConsoleUnavailable(f"Google Search Console could not be read: {exc.message}")


async def properties(
    session: ReadSession, google: Google, workspace_id: int
) -> list[SearchConsolePropertyOut]:
    credentials = await _credentials(session, google, workspace_id)
    try:
        found = await google.client.sites(credentials)
    except SearchConsoleError as exc:
        raise _domain_error(exc) from None
    return [
        SearchConsolePropertyOut(site_url=p.site_url, permission_level=p.permission_level)
        for p in found
    ]


def _date(value: str, field: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValidationFailed.field(field, "a date as YYYY-MM-DD") from None


def checked_range(data: SearchConsolePreviewIn, today: date) -> tuple[date, date]:
    start, end = _date(data.start_date, "start_date"), _date(data.end_date, "end_date")
    if end > today:
        raise ValidationFailed.field("end_date", "Search Console has no data after today")
    if start > end:
        raise ValidationFailed.field("start_date", "on or before end_date")
    if start < today - HISTORY:
        raise ValidationFailed.field("start_date", "Search Console keeps 16 months of data")
    return start, end


@dataclass
class _Merged:
    clicks: float = 0.0
    impressions: float = 0.0
    weighted_position: float = 0.0


async def preview(
    session: ReadSession,
    google: Google,
    schedule: Schedule,
    data: SearchConsolePreviewIn,
    rt: RankTrackingSettings,
    now: datetime,
) -> SearchConsolePreviewOut:
    """The property's most-clicked queries over the range, as keywords, each marked ``tracked``
    when the schedule measures it already. Queries that normalise to the same keyword are one
    row: clicks and impressions summed, the position averaged by impressions; rows with fewer
    than ``min_impressions`` impressions are left out."""
    start, end = checked_range(data, now.date())
    credentials = await _credentials(session, google, schedule.workspace_id)
    try:
        rows = await google.client.queries(
            data.site_url,
            start=start,
            end=end,
            credentials=credentials,
            data_state=data.data_state,
            max_rows=PREVIEW_ROWS + 1,
        )
    except SearchConsoleError as exc:
        raise _domain_error(exc) from None
    truncated = len(rows) > PREVIEW_ROWS
    merged: dict[str, _Merged] = {}
    for row in rows[:PREVIEW_ROWS]:
        keyword = normalise(row.keys[0])
        if not keyword or len(keyword) > 200:
            continue
        m = merged.setdefault(keyword, _Merged())
        m.clicks += row.clicks
        m.impressions += row.impressions
        m.weighted_position += row.position * row.impressions
    members = set((await resolve(session, schedule, MEMBER_LIMIT)).keywords)
    queries = [
        SearchConsoleQueryOut(
            keyword=keyword,
            clicks=round(m.clicks),
            impressions=round(m.impressions),
            ctr=round(m.clicks / m.impressions, 4) if m.impressions else 0.0,
            position=round(m.weighted_position / m.impressions, 1) if m.impressions else 0.0,
            tracked=keyword in members,
        )
        for keyword, m in merged.items()
        if m.impressions >= data.min_impressions
    ]
    queries.sort(key=lambda q: (-q.clicks, -q.impressions, q.keyword))
    return SearchConsolePreviewOut(
        site_url=data.site_url,
        start_date=start.isoformat(),
        end_date=end.isoformat(),
        queries=queries,
        truncated=truncated,
    )


async def add_to_schedule(
    session: WriteSession,
    rt: RankTrackingSettings,
    schedule: Schedule,
    keywords: list[str],
    tag: str | None,
    now: datetime,
) -> SearchConsoleAddOut:
    """Add the chosen queries to the schedule's keywords (its list, or its selection), skipping
    those it has; with a ``tag``, every chosen keyword carries it afterwards."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be edited")
    checked = tags.checked_tag(tag) if tag is not None else None
    norm = normalise_all(keywords)
    if not norm.keywords:
        raise ValidationFailed.field("keywords", "choose at least one query")
    if schedule.list_id is not None:
        kl = await lists.get_list(session, schedule.workspace_id, schedule.list_id)
        report = await lists.add_keywords(session, kl, keywords, now=now)
        added, existing, count = report.added, report.skipped_existing, report.keyword_count
        if added:
            activity.record_schedule_change(
                session,
                schedule,
                kind=activity.SCHEDULE_EDITED,
                change=f"{len(added)} keywords added to its list from Search Console",
                now=now,
            )
    else:
        current = list(schedule.keywords or [])
        have = set(current)
        added = [k for k in norm.keywords if k not in have]
        existing = [k for k in norm.keywords if k in have]
        if len(current) + len(added) > rt.max_selection_keywords:
            raise ValidationFailed.field(
                "keywords",
                f"a direct selection holds at most {rt.max_selection_keywords} keywords "
                f"({len(current)} now, {len(added)} to add)",
                code="selection_too_large",
            )
        if added:
            await edits.set_selection(session, rt, schedule, current + added, now)
        count = len(current) + len(added)
    if checked is not None:
        await tags.add_tag(session, schedule, checked, added + existing, now)
    return SearchConsoleAddOut(
        added=added,
        skipped_existing=existing,
        skipped_duplicates=norm.duplicates,
        invalid=norm.invalid,
        keyword_count=count,
        tag=checked,
    )
