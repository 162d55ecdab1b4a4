"""Fetch an ad account's campaigns for a dispatch: 1,000 per page, every page followed, each page
request retried on transient errors (3 attempts in total, 1 s then 2 s apart — spec AR-12).

Runs with a :class:`~app.integrations.meta.reader.MetaReader` only: nothing here can write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.engines.adrules.payloads import CampaignEntity
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MAX_PAGES, PAGE_SIZE, MetaReader, PageTrail
from app.integrations.meta.retry import RETRY_DELAYS, RetryLog, Sleep, with_retries
from app.integrations.meta.structs import CAMPAIGN_FIELDS, GraphCampaign, Page


@dataclass(slots=True)
class FetchProgress:
    """How far a fetch got, readable when it is cut short by a deadline."""

    pages: int = 0
    attempts: int = 0


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
    max_pages: int = MAX_PAGES,
    progress: FetchProgress | None = None,
    edge: str = "campaigns",
    fields: Sequence[str] = CAMPAIGN_FIELDS,
) -> Fetched:
    """All campaigns of ``account_id`` matching ``filtering``, following each page's
    ``paging.next`` exactly as Meta returns it until a page has none. Raises
    :class:`FetchFailed`."""
    log = RetryLog()
    seen = progress if progress is not None else FetchProgress()
    campaigns: list[CampaignEntity] = []
    trail = PageTrail("campaign list", max_pages=max_pages)
    next_url: str | None = None
    try:
        while True:

            async def one_page(url: str | None = next_url) -> Page[GraphCampaign]:
                try:
                    return await reader.campaigns_page(
                        account_id,
                        filtering=filtering,
                        limit=page_size,
                        next_url=url,
                        fields=fields,
                        edge=edge,
                    )
                finally:
                    seen.attempts += 1

            page = await with_retries(one_page, sleep=sleep, delays=delays, log=log)
            seen.pages += 1
            campaigns.extend(to_entity(c) for c in page.data)
            # Only a missing ``next`` ends the list: a short or empty page may come before more.
            next_url = trail.next_url(page)
            if next_url is None:
                return Fetched(campaigns, seen.pages, log.attempts)
    except MetaError as exc:
        raise FetchFailed(exc, log.attempts, seen.pages) from None
