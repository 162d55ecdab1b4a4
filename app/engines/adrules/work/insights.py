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
from collections.abc import Iterable, Sequence

from app.engines.adrules.catalogue import Period
from app.engines.adrules.schemas import (
    Condition,
    MetricMetricCondition,
    MetricValueCondition,
    TaskDocument,
)
from app.engines.adrules.work.insights_account import read_account_level
from app.engines.adrules.work.insights_batched import read_batched
from app.engines.adrules.work.insights_shapes import (
    BeforeCall,
    InsightsPlan,
    InsightsResult,
    Sleep,
)
from app.engines.adrules.work.metrics import insights_fields, is_insights_metric
from app.integrations.meta.reader import MetaReader

ITEM_RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0)
"""Waits before re-sending unfinished batch items (3 rounds in total)."""

MAX_THROTTLE_WAIT_SECONDS = 60.0
"""Default bound of a wait for Meta's throttling estimate inside one read."""

MODES = ("per_campaign", "packed", "account")


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
        await read_account_level(
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
    await read_batched(
        reader,
        campaign_ids,
        plan,
        result,
        per_campaign=mode == "per_campaign",
        sleep=sleep,
        retry_delays=retry_delays,
        concurrency=concurrency,
        max_wait_seconds=max_wait_seconds,
        windows=windows,
        before_call=before_call,
    )
    return result
