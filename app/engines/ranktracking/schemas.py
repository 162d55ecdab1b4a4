"""Request and response structs of position tracking (API, dashboard and services share them)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Literal

import msgspec

from app.schemas import Int64, Key, RowRef, Schema

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
KeywordInput = Annotated[
    list[Annotated[str, msgspec.Meta(max_length=700)]], msgspec.Meta(max_length=5000)
]
DataType = Literal["serp", "keyword_data"]
Frequency = Literal["daily", "weekly", "biweekly", "monthly", "quarterly"]
Depth = Literal["top10", "top100"]
Device = Literal["desktop", "mobile"]
Package = Literal["volume", "cpc", "trends"]
QueueName = Literal["standard", "priority"]
DomainInput = Annotated[str, msgspec.Meta(max_length=253)]
"""A site to measure as typed (normalised and checked by the schedule rules)."""
Devices = Annotated[list[Device], msgspec.Meta(max_length=10)]
Packages = Annotated[list[Package], msgspec.Meta(max_length=10)]


# -- keyword lists ---------------------------------------------------------------------------------


class ListIn(Schema):
    name: Name
    keywords: KeywordInput = []


class ListRename(Schema):
    name: Name


class KeywordsIn(Schema):
    keywords: KeywordInput


class KeywordImportIn(Schema):
    text: Annotated[str, msgspec.Meta(max_length=500_000)]
    format: Literal["text", "csv"] = "text"


class BulkAddOut(Schema):
    """What a bulk add did: existing and repeated keywords are skipped and reported, not errors."""

    added: list[str]
    skipped_existing: list[str]
    skipped_duplicates: list[str]
    invalid: list[str]
    keyword_count: int


class RemovedOut(Schema):
    removed: int
    keyword_count: int


class ListOut(Schema):
    id: int
    name: str
    keyword_count: int
    created_at: datetime
    updated_at: datetime


class ListDetailOut(ListOut):
    keywords: list[str]


class LocationOut(Schema):
    """One of the provider's locations."""

    location_code: int
    location_name: str
    country_iso_code: str
    location_type: str
    parent_code: int | None = None


# -- schedules -------------------------------------------------------------------------------------


class RankScheduleIn(Schema):
    """A new schedule. Exactly one of ``list_id`` (list-linked) and ``keywords`` (direct
    selection, SERP only) is given."""

    name: Annotated[str, msgspec.Meta(max_length=200)] = ""
    data_type: DataType = "serp"
    frequency: Frequency = "weekly"
    list_id: RowRef | None = None
    keywords: KeywordInput | None = None
    depth: Depth | None = None
    location_code: Int64 | None = None
    language_code: Key | None = None
    domain: DomainInput | None = None
    devices: Devices | None = None
    packages: Packages | None = None
    monthly_cap_eur: Decimal | None = None
    """Optional monthly cap in EUR (at least 5); absent means unlimited."""


class ScheduleEdit(Schema):
    """Editable fields (RT-16). ``data_type`` and ``list_id`` are accepted only to say clearly
    that they are fixed."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    frequency: Frequency | None = None
    depth: Depth | None = None
    location_code: Int64 | None = None
    language_code: Key | None = None
    domain: DomainInput | None = None
    devices: Devices | None = None
    packages: Packages | None = None
    monthly_cap_eur: Decimal | None = None
    unlimited: bool = False
    """Remove the monthly cap."""
    data_type: DataType | None = None
    list_id: RowRef | None = None


class SelectionIn(Schema):
    keywords: KeywordInput


class RunNowIn(Schema):
    queue: QueueName = "standard"


class EstimateOut(Schema):
    """RT-18: every figure of the admission estimate. Money in exact micro-euros (1 EUR =
    1,000,000), plus EUR strings for display: costs rounded up to the cent, balances down; the
    monthly estimate is whole cents, rounded up (RT-19)."""

    keyword_count: int
    queue: QueueName
    cost_per_run_micros: int
    cost_per_run_eur: str
    parts: list[EstimatePart]
    runs_per_month: str
    average_per_keyword_eur: str
    """Rounded for display; not a provider unit price."""
    monthly_cents: int
    monthly_eur: str
    available_micros: int
    available_eur: str
    balance_after_run_micros: int
    balance_after_run_eur: str


class EstimatePart(Schema):
    device: str | None
    micros: int


class RankRunOut(Schema):
    id: int
    request_id: int
    schedule_id: int
    device: str | None
    queue: str
    status: str
    shown_status: str
    """The read model's status: a failed row with positive counters reads as ``partial``."""
    error_code: str | None
    error_message: str | None
    requested: int
    retrieved: int
    no_data: int
    pending: int | None
    """While active: requested − retrieved − no data."""
    missing: int | None
    """Once terminal: the unexplained remainder."""
    reserved_micros: int
    settled_micros: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    location_code: int | None = None
    """The location this run measured (the schedule's at the time)."""


class LaunchOut(Schema):
    """RT-26/27: how many child runs a request launched, and why none when none did."""

    launched: int
    reason: str | None
    code: str | None
    message: str
    request_id: int | None
    runs: list[RankRunOut]


class GroupOut(Schema):
    """One log row: a request and its child runs (two for a two-device SERP request)."""

    request_id: int
    trigger: str
    queue: str
    due_at: datetime | None
    created_at: datetime
    status: str
    requested: int
    retrieved: int
    no_data: int
    missing: int | None
    settled_micros: int | None
    runs: list[RankRunOut]


class ScheduleOut(Schema):
    id: int
    name: str
    data_type: str
    frequency: str
    source: Literal["list", "selection"]
    list_id: int | None
    keywords: list[str] | None
    depth: Depth | None
    location_code: int | None
    location_name: str | None
    """The provider's name of ``location_code`` (RT-63)."""
    location_warning: str | None
    """Set when the provider no longer lists the location: the schedule still runs with it."""
    language_code: str | None
    domain: str | None
    devices: list[str]
    packages: list[str]
    monthly_cap_micros: int | None
    """The monthly cap in micro-euros (it is set in whole cents, as ``monthly_cap_eur``)."""
    monthly_cap_eur: str | None
    """The same cap for display, e.g. ``"12.50"``."""
    status: str
    next_due_at: datetime | None
    next_run: str
    """"retrying" after a dispatch that did not reach the worker; "pending" once due."""
    retrying: bool
    consecutive_blocks: int
    created_at: datetime
    archived_at: datetime | None
    last_run: GroupOut | None = None


class CreatedOut(Schema):
    schedule: ScheduleOut
    baseline: LaunchOut


class HealthPoint(Schema):
    request_id: int
    status: str
    retrieved: int
    requested: int


class LogOut(Schema):
    items: list[GroupOut]
    next_cursor: str | None
    health: list[HealthPoint]
    """The last 12 rows, oldest first (the health chart)."""


class ResultOut(Schema):
    run_id: int
    keyword: str
    device: str | None
    state: str
    position: int | None
    url: str | None
    features: list[str]
    data: dict[str, object] | None
    fetched_at: datetime | None


class HistoryPoint(Schema):
    run_id: int
    device: str | None
    state: str
    position: int | None
    fetched_at: datetime | None


class KeywordHistoryOut(Schema):
    keyword: str
    points: list[HistoryPoint]


class BalanceOut(Schema):
    """Exact micro-euros, and the available balance for display (rounded down to the cent)."""

    credits_micros: int
    settled_micros: int
    reserved_micros: int
    available_micros: int
    available_eur: str
    reconciliation_entries: int
    """Settlements where the provider billed more than the price list charged (RT-37)."""
    reconciliation_micros: int
    """What those settlements' provider costs exceeded the charges by (recorded, not charged)."""


class TopUpIn(Schema):
    amount_eur: Decimal
    """Positive, whole cents, at most 1,000,000 EUR."""
    note: Annotated[str, msgspec.Meta(max_length=300)] = ""


class LedgerEntryOut(Schema):
    id: int
    kind: str
    amount_micros: int
    schedule_id: int | None
    run_id: int | None
    reservation_id: int | None
    provider_cost: str | None
    note: str
    created_at: datetime


class ActivityOut(Schema):
    id: int
    kind: str
    code: str | None
    message: str
    schedule_id: int | None
    run_id: int | None
    created_at: datetime


class ListWriteOut(Schema):
    list: ListOut
    report: BulkAddOut


class LedgerPage(Schema):
    items: list[LedgerEntryOut]
    next_cursor: str | None


class ActivityPage(Schema):
    items: list[ActivityOut]
    next_cursor: str | None


# -- tags and Search Console ----------------------------------------------------------------------

TagInput = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
"""A tag as typed (normalised to at most 50 characters by the tag rules)."""


class TagKeywordsIn(Schema):
    """Put ``tag`` on (or take it off) these keywords of the schedule."""

    tag: TagInput
    keywords: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=700)]],
        msgspec.Meta(min_length=1, max_length=1000),
    ]


class TagOut(Schema):
    tag: str
    keyword_count: int


class TagChangeOut(Schema):
    """What a tag change did: ``changed`` keywords gained (or lost) the tag; the others already
    had it (or did not)."""

    tag: str
    changed: list[str]
    unchanged: list[str]
    keyword_count: int
    """How many of the schedule's keywords carry the tag now."""


class KeywordTagsOut(Schema):
    """Every tag of the schedule with its keywords, and each tagged keyword's tags."""

    tags: list[TagOut]
    keywords: dict[str, list[str]]


SiteUrl = Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
IsoDate = Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d{2}-\d{2}$")]


class SearchConsolePropertyOut(Schema):
    site_url: str
    permission_level: str


class SearchConsolePreviewIn(Schema):
    """A property and a date range (inclusive, Google's days); ``data_state`` ``all`` includes
    the fresh days Google still completes."""

    site_url: SiteUrl
    start_date: IsoDate
    end_date: IsoDate
    data_state: Literal["final", "all"] = "final"
    min_impressions: Annotated[int, msgspec.Meta(ge=0, le=1_000_000_000)] = 0
    """Only queries shown at least this often over the range (summed over their spellings)."""


class SearchConsoleQueryOut(Schema):
    keyword: str
    """The query, normalised like every keyword."""
    clicks: int
    impressions: int
    ctr: float
    """Clicks per impression, as a fraction."""
    position: float
    """Google's average position over the range (1 the top)."""
    tracked: bool
    """The schedule already measures this keyword."""


class SearchConsolePreviewOut(Schema):
    site_url: str
    start_date: str
    end_date: str
    queries: list[SearchConsoleQueryOut]
    truncated: bool
    """More queries exist than the preview reads (the most clicked are shown)."""


class SearchConsoleAddIn(Schema):
    """The chosen queries to add to the schedule's keywords, optionally tagged."""

    keywords: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=700)]],
        msgspec.Meta(min_length=1, max_length=5000),
    ]
    tag: TagInput | None = None


class SearchConsoleAddOut(Schema):
    added: list[str]
    skipped_existing: list[str]
    skipped_duplicates: list[str]
    invalid: list[str]
    keyword_count: int
    """The schedule's keywords after the addition."""
    tag: str | None = None
