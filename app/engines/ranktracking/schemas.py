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


class ImportIn(Schema):
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


# -- schedules -------------------------------------------------------------------------------------


class ScheduleIn(Schema):
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


class RunOut(Schema):
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


class LaunchOut(Schema):
    """RT-26/27: how many child runs a request launched, and why none when none did."""

    launched: int
    reason: str | None
    code: str | None
    message: str
    request_id: int | None
    runs: list[RunOut]


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
    runs: list[RunOut]


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
    language_code: str | None
    domain: str | None
    devices: list[str]
    packages: list[str]
    monthly_cap_cents: int | None
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
