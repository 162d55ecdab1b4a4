"""The Insights read (spec AR-14): exactly the fields the conditions need, one sub-request per
reporting period, in Graph batch calls.

Conditions are grouped by reporting period and each period's Insights fields de-duplicated
(:func:`plan_insights`). Two ways to send them, with identical results:

* ``per_campaign`` — one batch call per campaign carrying one sub-request per period (the seed's
  figure: one HTTP call per campaign);
* ``packed`` — the sub-requests of several campaigns packed into batch calls of up to 50 items, so
  an account of *n* campaigns and *p* periods costs ⌈n·p/50⌉ calls;
* ``account`` — account-level Insights with ``level=campaign``, one paged request per period (the
  campaigns narrowed with a ``campaign.id IN`` filter, 500 ids per request); a campaign absent from
  the rows had no delivery in that period.

Every sub-request carries ``use_unified_attribution_setting=true``, or the rule's own
``action_attribution_windows`` when it names them (spec AR-41). A failed item with a transient
error and a ``null`` item (Meta timed out before reaching it) are sent again, alone with the other
unfinished items, up to ``len(retry_delays)`` more times; a permanent error becomes that campaign's
error. A whole batch call that fails transiently is retried the same way.

Throttling: when Meta's usage headers (of the call or of a batch item) estimate when access returns,
the wait before the next round is that estimate if it is longer than the schedule's. An estimate
beyond ``max_wait_seconds`` stops the read at once — no further call is made on the account — and
the result says so (``throttled``, and the campaigns left ``unread``) so the job can come back when
access returns.

Stop: ``before_call`` is asked immediately before every call; once it gives a reason (the platform
stop, spec AR-43) no further call is made and the campaigns not read yet are left ``unread`` with
the result's ``stopped`` saying why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from app.engines.adrules.catalogue import DATE_PRESETS, EFFECTIVE_STATUSES, Period
from app.engines.adrules.schemas import (
    Condition,
    MetricMetricCondition,
    MetricValueCondition,
    TaskDocument,
)
from app.engines.adrules.work.metrics import InsightsRow, insights_fields, is_insights_metric
from app.integrations.meta.errors import MetaError, decode_error, error_from_response
from app.integrations.meta.reader import MAX_BATCH, BatchGet, MetaReader
from app.integrations.meta.retry import next_wait, with_retries
from app.integrations.meta.structs import BatchReply
from app.integrations.meta.usage import parse_usage

Sleep = Callable[[float], Awaitable[None]]
BeforeCall = Callable[[], Awaitable[str | None]]
"""Asked before each call; a reason stops the read there (no further call is made)."""

ITEM_RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0)
"""Waits before re-sending unfinished batch items (3 rounds in total)."""

MAX_THROTTLE_WAIT_SECONDS = 60.0
"""Default bound of a wait for Meta's throttling estimate inside one read."""

MODES = ("per_campaign", "packed", "account")

ACCOUNT_PAGE_SIZE = 500
"""Rows per page, and campaign ids per filter, of an account-level Insights request."""


@dataclass(frozen=True, slots=True)
class InsightsPlan:
    """Insights fields to request per reporting period (sorted, de-duplicated)."""

    fields: dict[str, list[str]]

    @property
    def periods(self) -> list[str]:
        return sorted(self.fields)

    def __bool__(self) -> bool:
        return bool(self.fields)


def _metric_periods(cond: Condition) -> Iterable[tuple[str, Period]]:
    if isinstance(cond, MetricValueCondition):
        yield cond.metric, cond.period
    elif isinstance(cond, MetricMetricCondition):
        yield cond.metric, cond.period
        yield cond.other_metric, cond.other_period


def plan_insights(tasks: Sequence[TaskDocument]) -> InsightsPlan:
    """Group every Insights metric of the tasks' conditions by period; other metrics are left out."""
    metrics: dict[str, set[str]] = {}
    for task in tasks:
        for cond in task.conditions:
            for metric, period in _metric_periods(cond):
                if is_insights_metric(metric):
                    metrics.setdefault(period, set()).add(metric)
    return InsightsPlan({period: insights_fields(ms) for period, ms in metrics.items()})


CampaignRows = dict[str, InsightsRow | None]
"""Insights row per period of one campaign (``None``: no delivery in that period)."""


@dataclass(slots=True)
class InsightsStats:
    """What the read cost: HTTP calls and sub-requests (retries included)."""

    calls: int = 0
    items: int = 0
    retried_items: int = 0


@dataclass(slots=True)
class InsightsResult:
    rows: dict[str, CampaignRows] = field(default_factory=dict)
    errors: dict[str, MetaError] = field(default_factory=dict)
    stats: InsightsStats = field(default_factory=InsightsStats)
    throttled: MetaError | None = None
    """Meta throttled the account for longer than the read may wait (the longest such error)."""
    unread: set[str] = field(default_factory=set)
    """Campaigns not read because of that throttle, or of a stop (neither in ``rows`` nor in
    ``errors``)."""
    stopped: str | None = None
    """Why the read stopped before its end (the platform stop): no call was made after it."""

    async def may_call(self, before_call: BeforeCall | None, campaign_ids: Iterable[str]) -> bool:
        """Whether the next call may go out; when a stop says no, ``campaign_ids`` stay unread."""
        if self.stopped is None and before_call is not None:
            self.stopped = await before_call()
        if self.stopped is not None:
            self.unread.update(campaign_ids)
            return False
        return True

    def stop(self, error: MetaError, campaign_ids: Iterable[str]) -> None:
        """Record a throttle too long to wait for; ``campaign_ids`` stay unread."""
        if self.throttled is None or (error.retry_after_seconds or 0) > (
            self.throttled.retry_after_seconds or 0
        ):
            self.throttled = error
        self.unread.update(campaign_ids)


class _InsightsPage(msgspec.Struct):
    data: list[InsightsRow]


_page = msgspec.json.Decoder(_InsightsPage)


class CampaignInsightsRow(InsightsRow):
    """An account-level row (``level=campaign``): the same fields plus the campaign's id."""

    campaign_id: str = ""


def attribution_params(windows: Sequence[str] = ()) -> dict[str, Any]:
    """The attribution of an Insights request: each ad set's own setting (Meta's unified
    setting), or the rule's ``action_attribution_windows`` (spec AR-41)."""
    if windows:
        return {"action_attribution_windows": list(windows)}
    return {"use_unified_attribution_setting": True}


def sub_request(
    campaign_id: str, period: str, fields: list[str], windows: Sequence[str] = ()
) -> BatchGet:
    return BatchGet(
        path=f"{campaign_id}/insights",
        params={
            "date_preset": DATE_PRESETS[period],  # type: ignore[index]  # a checked Period
            "fields": fields,
            **attribution_params(windows),
        },
    )


def _item_outcome(reply: BatchReply | None) -> InsightsRow | MetaError | _Retry | None:
    """One batch item: a row, no row, a permanent error, or something to send again."""
    if reply is None:
        return _Retry(MetaError("the batch timed out before this item", transient=True))
    body = (reply.body or "").encode()
    if reply.code >= 400:
        # A sub-request's own usage headers say how long its throttle lasts.
        headers = {h.get("name", "").lower(): h.get("value", "") for h in reply.headers or []}
        regain = parse_usage(headers).regain_access_seconds
        error = error_from_response(reply.code, body, retry_after_seconds=regain or None)
        return _Retry(error) if error.transient else error
    try:
        page = _page.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return decode_error("insights item", exc)
    if len(page.data) > 1:
        return MetaError(
            f"expected one insights row per period, got {len(page.data)}", transient=False
        )
    return page.data[0] if page.data else None


class _Stopped(Exception):
    """The stop said no before a call: the read ends there."""


@dataclass(frozen=True, slots=True)
class _Retry:
    error: MetaError


@dataclass(frozen=True, slots=True)
class _Item:
    campaign_id: str
    period: str
    request: BatchGet


async def _send(
    reader: MetaReader,
    items: list[_Item],
    result: InsightsResult,
    *,
    sleep: Sleep,
    retry_delays: tuple[float, ...],
    max_wait_seconds: float,
    before_call: BeforeCall | None = None,
) -> None:
    """Send ``items`` (≤ 50) as one batch call, then re-send the unfinished ones."""
    pending = items
    wait = 0.0
    for round_ in range(len(retry_delays) + 1):
        if result.throttled is not None:
            # Another call on this account was throttled: calling now would only be refused.
            result.stop(result.throttled, (i.campaign_id for i in pending))
            return
        if round_:
            await sleep(wait)
        if not await result.may_call(before_call, (i.campaign_id for i in pending)):
            return
        if round_:
            result.stats.retried_items += len(pending)
        result.stats.calls += 1
        result.stats.items += len(pending)
        last_round = round_ == len(retry_delays)
        delay = None if last_round else retry_delays[round_]
        try:
            replies = await reader.batch([i.request for i in pending])
        except MetaError as exc:
            waited = _after_failed_call(exc, pending, result, delay, max_wait_seconds)
            if waited is None:
                return
            wait = waited
            continue
        unfinished, retry_errors = _file_replies(pending, replies, result, last_round=last_round)
        if not unfinished:
            return
        assert delay is not None  # the last round leaves nothing unfinished
        waited = _retry_wait(unfinished, retry_errors, result, delay, max_wait_seconds)
        if waited is None:
            return
        wait = waited
        pending = unfinished


def _after_failed_call(
    exc: MetaError,
    pending: list[_Item],
    result: InsightsResult,
    delay: float | None,
    max_wait_seconds: float,
) -> float | None:
    """How long to wait before sending the batch again after the call itself failed; ``None``
    when it is not sent again (``result`` then records why for each item)."""
    if not exc.transient or delay is None:
        for item in pending:
            result.errors.setdefault(item.campaign_id, exc)
        return None
    waited = next_wait(exc, delay, max_wait_seconds)
    if waited is None:
        result.stop(exc, (i.campaign_id for i in pending))
    return waited


def _file_replies(
    pending: list[_Item],
    replies: list[BatchReply | None],
    result: InsightsResult,
    *,
    last_round: bool,
) -> tuple[list[_Item], list[MetaError]]:
    """Record each item's rows or error; returns the items to send again, with their errors."""
    unfinished: list[_Item] = []
    retry_errors: list[MetaError] = []
    for item, reply in zip(pending, replies, strict=True):
        outcome = _item_outcome(reply)
        if isinstance(outcome, _Retry):
            if last_round:
                result.errors.setdefault(item.campaign_id, outcome.error)
            else:
                unfinished.append(item)
                retry_errors.append(outcome.error)
        elif isinstance(outcome, MetaError):
            result.errors.setdefault(item.campaign_id, outcome)
        else:
            result.rows.setdefault(item.campaign_id, {})[item.period] = outcome
    return unfinished, retry_errors


def _retry_wait(
    unfinished: list[_Item],
    retry_errors: list[MetaError],
    result: InsightsResult,
    delay: float,
    max_wait_seconds: float,
) -> float | None:
    """The wait before re-sending the unfinished items: the longest any of them asks for, or
    ``None`` (they stop) when one asks for longer than the run may wait."""
    waits = [next_wait(e, delay, max_wait_seconds) for e in retry_errors]
    if None in waits:
        longest = max(retry_errors, key=lambda e: e.retry_after_seconds or 0)
        result.stop(longest, (i.campaign_id for i in unfinished))
        return None
    return max(w for w in waits if w is not None)


def _file_account_rows(
    rows: list[CampaignInsightsRow], wanted: set[str], period: str, result: InsightsResult
) -> None:
    """Each wanted campaign's row of one period (two rows for one campaign is its error)."""
    seen: set[str] = set()
    for row in rows:
        if row.campaign_id not in wanted:
            continue
        if row.campaign_id in seen:
            result.errors.setdefault(
                row.campaign_id,
                MetaError(f"two insights rows for one campaign in {period}", transient=False),
            )
            continue
        seen.add(row.campaign_id)
        result.rows[row.campaign_id][period] = row


async def _read_account_level(
    reader: MetaReader,
    account_id: str,
    campaign_ids: Sequence[str],
    plan: InsightsPlan,
    result: InsightsResult,
    *,
    sleep: Sleep,
    retry_delays: tuple[float, ...],
    max_wait_seconds: float,
    statuses: Sequence[str] = (),
    windows: Sequence[str] = (),
    before_call: BeforeCall | None = None,
) -> None:
    wanted = set(campaign_ids)
    # Account-level Insights leave out archived (and deleted) objects unless the request filters
    # on their effective status: naming every status the list holds makes the rows the same as
    # the per-campaign reads, record for record.
    status_filter = {
        "field": "campaign.effective_status",
        "operator": "IN",
        "value": sorted(set(statuses) or set(EFFECTIVE_STATUSES)),
    }
    for cid in campaign_ids:
        result.rows[cid] = dict.fromkeys(plan.periods)  # absent from the rows: no delivery

    async def one(period: str, chunk: Sequence[str]) -> None:
        fields = sorted({*plan.fields[period], "campaign_id"})

        async def call() -> list[CampaignInsightsRow]:
            if not await result.may_call(before_call, chunk):
                raise _Stopped
            result.stats.calls += 1
            return await reader.insights(
                account_id,
                date_preset=DATE_PRESETS[period],  # type: ignore[index]  # a checked Period
                fields=fields,
                row_type=CampaignInsightsRow,
                extra={
                    "use_unified_attribution_setting": None,
                    **attribution_params(windows),
                    "level": "campaign",
                    "limit": ACCOUNT_PAGE_SIZE,
                    "filtering": [
                        {"field": "campaign.id", "operator": "IN", "value": list(chunk)},
                        status_filter,
                    ],
                },
            )

        if result.throttled is not None:
            result.stop(result.throttled, chunk)
            return
        try:
            rows = await with_retries(
                call, sleep=sleep, delays=retry_delays, max_wait_seconds=max_wait_seconds
            )
        except _Stopped:
            return
        except MetaError as exc:
            if exc.transient and (exc.retry_after_seconds or 0) > max_wait_seconds:
                result.stop(exc, chunk)
                return
            for cid in chunk:
                result.errors.setdefault(cid, exc)
            return
        result.stats.items += 1
        # Pages beyond the first are further requests.
        result.stats.calls += max(0, (len(rows) - 1) // ACCOUNT_PAGE_SIZE)
        _file_account_rows(rows, wanted, period, result)

    chunks = [
        campaign_ids[i : i + ACCOUNT_PAGE_SIZE]
        for i in range(0, len(campaign_ids), ACCOUNT_PAGE_SIZE)
    ]
    await asyncio.gather(*(one(period, chunk) for period in plan.periods for chunk in chunks))


async def read_insights(
    reader: MetaReader,
    campaign_ids: Sequence[str],
    plan: InsightsPlan,
    *,
    mode: str = "packed",
    account_id: str = "",
    sleep: Sleep = asyncio.sleep,
    retry_delays: tuple[float, ...] = ITEM_RETRY_DELAYS,
    concurrency: int = 8,
    max_wait_seconds: float = MAX_THROTTLE_WAIT_SECONDS,
    statuses: Sequence[str] = (),
    windows: Sequence[str] = (),
    before_call: BeforeCall | None = None,
) -> InsightsResult:
    """Read the planned periods of every campaign. Campaigns with an error are in ``errors``
    (and not in ``rows``); the others have a row (or ``None``) for every planned period."""
    if mode not in MODES:
        raise ValueError(f"unknown insights mode {mode!r}")
    result = InsightsResult()
    if not plan or not campaign_ids:
        for cid in campaign_ids:
            result.rows[cid] = {}
        return result
    if mode == "account":
        if not account_id:
            raise ValueError("the account mode needs the ad account id")
        await _read_account_level(
            reader,
            account_id,
            campaign_ids,
            plan,
            result,
            sleep=sleep,
            retry_delays=retry_delays,
            max_wait_seconds=max_wait_seconds,
            statuses=statuses,
            windows=windows,
            before_call=before_call,
        )
        result.unread -= result.errors.keys()
        for cid in (*result.errors, *result.unread):
            result.rows.pop(cid, None)
        return result
    periods = plan.periods
    if len(periods) > MAX_BATCH:  # pragma: no cover - there are 11 periods
        raise ValueError("more periods than a batch can hold")
    items = [
        _Item(cid, period, sub_request(cid, period, plan.fields[period], windows))
        for cid in campaign_ids
        for period in periods
    ]
    if mode == "per_campaign":
        chunks = [items[i : i + len(periods)] for i in range(0, len(items), len(periods))]
    else:
        # Whole campaigns per chunk, so a campaign's periods travel (and fail) together.
        per_chunk = max(1, MAX_BATCH // len(periods)) * len(periods)
        chunks = [items[i : i + per_chunk] for i in range(0, len(items), per_chunk)]
    gate = asyncio.Semaphore(concurrency)

    async def run(chunk: list[_Item]) -> None:
        async with gate:
            await _send(
                reader,
                chunk,
                result,
                sleep=sleep,
                retry_delays=retry_delays,
                max_wait_seconds=max_wait_seconds,
                before_call=before_call,
            )

    await asyncio.gather(*(run(c) for c in chunks))
    # A campaign with an error is in ``errors`` only, even if another of its periods went unread.
    result.unread -= result.errors.keys()
    for cid in campaign_ids:
        if cid in result.errors or cid in result.unread:
            result.rows.pop(cid, None)
        else:
            result.rows.setdefault(cid, {})
    return result
