"""Fetch an ad account's campaigns for a dispatch: 1,000 per page, every page followed, each page
request retried on transient errors (3 attempts in total, 1 s then 2 s apart — spec AR-12).

Runs with a :class:`~app.integrations.meta.reader.MetaReader` only: nothing here can write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.engines.adrules.payloads import CampaignEntity
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MAX_PAGES, PAGE_SIZE, MetaReader
from app.integrations.meta.retry import RETRY_DELAYS, RetryLog, Sleep, with_retries
from app.integrations.meta.structs import GraphCampaign, Page


@dataclass(frozen=True, slots=True)
class Fetched:
    campaigns: list[CampaignEntity]
    pages: int
    attempts: int


class FetchFailed(Exception):
    """The account's campaigns could not be fetched; ``attempts`` requests were made in all."""

    def __init__(self, error: MetaError, attempts: int, pages: int) -> None:
        super().__init__(error.describe())
        self.error = error
        self.attempts = attempts
        self.pages = pages


def _minor_units(raw: str | None, field: str, campaign_id: str) -> int | None:
    if raw is None or raw == "":
        return None
    if not raw.isdigit():
        raise MetaError(
            f"campaign {campaign_id} has a {field} that is not whole minor units: {raw[:40]!r}",
            transient=False,
        )
    return int(raw)


def _created(raw: str | None) -> datetime | None:
    if not raw:
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        return None


def to_entity(campaign: GraphCampaign) -> CampaignEntity:
    """Decode the strings Meta sends into the job's typed campaign."""
    return CampaignEntity(
        id=campaign.id,
        name=campaign.name,
        effective_status=campaign.effective_status,
        daily_budget=_minor_units(campaign.daily_budget, "daily_budget", campaign.id),
        lifetime_budget=_minor_units(campaign.lifetime_budget, "lifetime_budget", campaign.id),
        created_time=_created(campaign.created_time),
    )


async def fetch_campaigns(
    reader: MetaReader,
    account_id: str,
    filtering: list[dict[str, Any]],
    *,
    sleep: Sleep,
    page_size: int = PAGE_SIZE,
    delays: tuple[float, ...] = RETRY_DELAYS,
) -> Fetched:
    """All campaigns of ``account_id`` matching ``filtering``. Raises :class:`FetchFailed`."""
    log = RetryLog()
    campaigns: list[CampaignEntity] = []
    after: str | None = None
    pages = 0
    try:
        for _ in range(MAX_PAGES):
            cursor = after

            async def one_page(cursor: str | None = cursor) -> Page[GraphCampaign]:
                return await reader.campaigns_page(
                    account_id, filtering=filtering, limit=page_size, after=cursor
                )

            page = await with_retries(one_page, sleep=sleep, delays=delays, log=log)
            pages += 1
            campaigns.extend(to_entity(c) for c in page.data)
            # Only a missing ``next`` ends the list: a short or empty page may come before more.
            if not page.has_next:
                return Fetched(campaigns, pages, log.attempts)
            if not page.after or page.after == after:
                raise MetaError(
                    "a campaign page announced a next page without a new cursor", transient=False
                )
            after = page.after
        raise MetaError(f"more than {MAX_PAGES} campaign pages", transient=False)
    except MetaError as exc:
        raise FetchFailed(exc, log.attempts, pages) from None
