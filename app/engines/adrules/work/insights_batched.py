"""The Insights read as Graph batch calls (spec AR-14): one sub-request per campaign and period,
sent one campaign per call (``per_campaign``) or packed into calls of up to 50 items
(``packed``). A failed item with a transient error and a ``null`` item (Meta timed out before
reaching it) are sent again, alone with the other unfinished items; a whole batch call that fails
transiently is retried the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from app.engines.adrules.catalogue import DATE_PRESETS
from app.engines.adrules.work.insights_shapes import (
    BeforeCall,
    InsightsPlan,
    InsightsResult,
    Sleep,
    attribution_params,
)
from app.engines.adrules.work.metrics import InsightsRow
from app.integrations.meta.errors import MetaError, decode_error, error_from_response
from app.integrations.meta.reader import MAX_BATCH, BatchGet, MetaReader
from app.integrations.meta.retry import next_wait
from app.integrations.meta.structs import BatchReply
from app.integrations.meta.usage import parse_usage


class _InsightsPage(msgspec.Struct):
    data: list[InsightsRow]


_page = msgspec.json.Decoder(_InsightsPage)


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


async def read_batched(
    reader: MetaReader,
    campaign_ids: Sequence[str],
    plan: InsightsPlan,
    result: InsightsResult,
    *,
    per_campaign: bool,
    sleep: Sleep,
    retry_delays: tuple[float, ...],
    concurrency: int,
    max_wait_seconds: float,
    windows: Sequence[str] = (),
    before_call: BeforeCall | None = None,
) -> None:
    """Read the planned periods of every campaign into ``result``: one batch call per campaign
    (``per_campaign``) or whole campaigns packed into calls of up to 50 items."""
    periods = plan.periods
    if len(periods) > MAX_BATCH:  # pragma: no cover - there are 11 periods
        raise ValueError("more periods than a batch can hold")
    items = [
        _Item(cid, period, sub_request(cid, period, plan.fields[period], windows))
        for cid in campaign_ids
        for period in periods
    ]
    if per_campaign:
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
