"""The Insights read at account level (spec AR-14): ``level=campaign`` rows, one paged request
per period, the campaigns narrowed with a ``campaign.id IN`` filter (500 ids per request); a
campaign absent from the rows had no delivery in that period."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from app.engines.adrules.catalogue import DATE_PRESETS, EFFECTIVE_STATUSES
from app.engines.adrules.work.insights_shapes import (
    BeforeCall,
    InsightsPlan,
    InsightsResult,
    Sleep,
    Stopped,
    attribution_params,
)
from app.engines.adrules.work.metrics import InsightsRow
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.integrations.meta.retry import with_retries

ACCOUNT_PAGE_SIZE = 500
"""Rows per page, and campaign ids per filter, of an account-level Insights request."""


class CampaignInsightsRow(InsightsRow):
    """An account-level row (``level=campaign``): the same fields plus the campaign's id."""

    campaign_id: str = ""


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


async def read_account_level(
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
                raise Stopped
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
        except Stopped:
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
