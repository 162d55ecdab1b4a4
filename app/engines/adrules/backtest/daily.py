"""Daily Insights for a past range, in as few Graph calls as batching allows.

One account-level Insights sub-request per id chunk and day window: ``level`` = the rule's level,
``time_range`` = the window, ``time_increment=1`` (one row per object and day with delivery, each
with its ``date_start``), ``filtering`` on the objects' ids (500 per chunk) and on every effective
status they have (account-level Insights leave archived objects out otherwise). A window holds as
many days as fill one page of ``PAGE_SIZE`` rows for its chunk, so a page rarely has a successor;
the sub-requests go out up to 50 per batch call through the engine's batch sender (a ``null`` or
transient item is sent again, an item's error is its own). A page that has a ``paging.next`` is
followed exactly as Meta returns it until a page has none.

500 objects over 37 days (a 30-day range and a 7-day lookback) are 37 sub-requests: one call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import msgspec

from app.engines.adrules.work.batched import BatchStats, Sleep, send_in_batches
from app.engines.adrules.work.metrics import InsightsRow
from app.integrations.meta.errors import MetaError, decode_error
from app.integrations.meta.reader import BatchGet, MetaReader, PageTrail
from app.integrations.meta.retry import RETRY_DELAYS, with_retries
from app.integrations.meta.structs import Page

PAGE_SIZE = 500
"""Rows asked per page, and ids per ``filtering`` chunk."""


class DailyRow(InsightsRow):
    """A row of ``time_increment=1``: one object's one day."""

    date_start: str = ""
    campaign_id: str = ""
    adset_id: str = ""
    ad_id: str = ""


_page = msgspec.json.Decoder(Page[DailyRow])


@dataclass(slots=True)
class DailyRead:
    rows: dict[str, dict[date, InsightsRow]] = field(default_factory=dict)
    """Per object id, its row per day (a day without a row had no delivery)."""
    errors: dict[str, MetaError] = field(default_factory=dict)
    """Objects whose Insights could not be read."""
    stats: BatchStats = field(default_factory=BatchStats)
    pages_followed: int = 0
    rows_read: int = 0

    @property
    def calls(self) -> int:
        """Graph HTTP calls made: batch calls and the pages followed."""
        return self.stats.calls + self.pages_followed


@dataclass(frozen=True, slots=True)
class _Request:
    ids: tuple[str, ...]
    since: date
    until: date
    get: BatchGet


def plan_requests(
    account_id: str,
    *,
    level: str,
    object_ids: Sequence[str],
    statuses: Sequence[str],
    fields: Sequence[str],
    since: date,
    until: date,
) -> list[_Request]:
    """The sub-requests covering every id and day, each filling about one page."""
    wanted = sorted({*fields, f"{level}_id", "date_start"})
    requests: list[_Request] = []
    for start in range(0, len(object_ids), PAGE_SIZE):
        chunk = tuple(object_ids[start : start + PAGE_SIZE])
        window = max(1, PAGE_SIZE // len(chunk))
        first = since
        while first <= until:
            last = min(until, first + timedelta(days=window - 1))
            filtering = [{"field": f"{level}.id", "operator": "IN", "value": list(chunk)}]
            if statuses:
                filtering.append(
                    {
                        "field": f"{level}.effective_status",
                        "operator": "IN",
                        "value": sorted(set(statuses)),
                    }
                )
            params = {
                "level": level,
                "time_range": {"since": first.isoformat(), "until": last.isoformat()},
                "time_increment": 1,
                "fields": wanted,
                "filtering": filtering,
                "limit": PAGE_SIZE,
                "use_unified_attribution_setting": True,
            }
            requests.append(
                _Request(chunk, first, last, BatchGet(f"{account_id}/insights", params))
            )
            first = last + timedelta(days=1)
    return requests


def _file(read: DailyRead, level: str, wanted: set[str], rows: list[DailyRow]) -> None:
    key = f"{level}_id"
    for row in rows:
        object_id = getattr(row, key)
        if object_id not in wanted:
            continue
        try:
            day = date.fromisoformat(row.date_start)
        except ValueError:
            read.errors.setdefault(
                object_id,
                MetaError(
                    f"an Insights row has no valid date_start: {row.date_start!r}", transient=False
                ),
            )
            continue
        read.rows_read += 1
        read.rows.setdefault(object_id, {})[day] = row


async def read_daily(
    reader: MetaReader,
    account_id: str,
    *,
    level: str,
    object_ids: Sequence[str],
    statuses: Sequence[str],
    fields: Sequence[str],
    since: date,
    until: date,
    sleep: Sleep = asyncio.sleep,
    retry_delays: tuple[float, ...] = RETRY_DELAYS,
    max_wait_seconds: float = 60.0,
) -> DailyRead:
    """Every object's daily rows from ``since`` to ``until`` (the account's days)."""
    read = DailyRead()
    wanted = set(object_ids)
    if not object_ids:
        return read
    requests = plan_requests(
        account_id,
        level=level,
        object_ids=object_ids,
        statuses=statuses,
        fields=fields,
        since=since,
        until=until,
    )
    results = await send_in_batches(
        [r.get for r in requests],
        reader.batch,
        sleep=sleep,
        retry_delays=retry_delays,
        max_wait_seconds=max_wait_seconds,
        stats=read.stats,
    )
    for request, result in zip(requests, results, strict=True):
        if result.error is not None or result.body is None:
            error = result.error or MetaError("no reply for this request", transient=False)
            for object_id in request.ids:
                read.errors.setdefault(object_id, error)
            continue
        try:
            await _follow(
                reader, read, level, wanted, result.body, sleep, retry_delays, max_wait_seconds
            )
        except MetaError as exc:
            for object_id in request.ids:
                read.errors.setdefault(object_id, exc)
    for object_id in read.errors:
        read.rows.pop(object_id, None)
    return read


async def _follow(
    reader: MetaReader,
    read: DailyRead,
    level: str,
    wanted: set[str],
    body: bytes,
    sleep: Sleep,
    retry_delays: tuple[float, ...],
    max_wait_seconds: float,
) -> None:
    """File a first page's rows, then every page its ``paging.next`` leads to."""
    trail = PageTrail("daily insights")
    page = _decode(body)
    while True:
        _file(read, level, wanted, page.data)
        url = trail.next_url(page)
        if url is None:
            return

        async def one(link: str = url) -> Page[DailyRow]:
            read.pages_followed += 1
            return _decode(await reader.get_next(link))

        page = await with_retries(
            one, sleep=sleep, delays=retry_delays, max_wait_seconds=max_wait_seconds
        )


def _decode(body: bytes) -> Page[DailyRow]:
    try:
        page: Page[DailyRow] = _page.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise decode_error("daily insights", exc) from None
    return page
