"""The Insights read's plan and result (spec AR-14), shared by its two ways of sending: batched
sub-requests per campaign (:mod:`.insights_batched`) and account-level rows
(:mod:`.insights_account`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.engines.adrules.work.metrics import InsightsRow
from app.integrations.meta.errors import MetaError

Sleep = Callable[[float], Awaitable[None]]
BeforeCall = Callable[[], Awaitable[str | None]]
"""Asked before each call; a reason stops the read there (no further call is made)."""


@dataclass(frozen=True, slots=True)
class InsightsPlan:
    """Insights fields to request per reporting period (sorted, de-duplicated)."""

    fields: dict[str, list[str]]

    @property
    def periods(self) -> list[str]:
        return sorted(self.fields)

    def __bool__(self) -> bool:
        return bool(self.fields)


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


def attribution_params(windows: Sequence[str] = ()) -> dict[str, Any]:
    """The attribution of an Insights request: each ad set's own setting (Meta's unified
    setting), or the rule's ``action_attribution_windows`` (spec AR-41)."""
    if windows:
        return {"action_attribution_windows": list(windows)}
    return {"use_unified_attribution_setting": True}


class Stopped(Exception):
    """The stop said no before a call: the read ends there."""
