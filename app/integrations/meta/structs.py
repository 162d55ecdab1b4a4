"""What the Graph API returns, decoded into typed structs (unknown fields are ignored: Meta adds
fields over time). Numbers Meta sends as strings stay strings here; the callers convert them exactly
(budgets to integer minor units, money to Decimal)."""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")


class Cursors(msgspec.Struct):
    before: str | None = None
    after: str | None = None


class Paging(msgspec.Struct):
    cursors: Cursors | None = None
    next: str | None = None
    previous: str | None = None


class Page(msgspec.Struct, Generic[T]):
    """One page of a Graph edge: stop only when ``paging.next`` is absent (a page may be short or
    empty while more follow)."""

    data: list[T]
    paging: Paging | None = None

    @property
    def has_next(self) -> bool:
        return self.paging is not None and bool(self.paging.next)

    @property
    def after(self) -> str | None:
        if self.paging is None or self.paging.cursors is None:
            return None
        return self.paging.cursors.after


class GraphAdAccount(msgspec.Struct):
    id: str
    """``act_<id>``."""
    name: str = ""
    currency: str = "USD"
    timezone_name: str = "UTC"
    account_status: int = 1


class GraphCampaign(msgspec.Struct):
    id: str
    name: str = ""
    effective_status: str = ""
    status: str | None = None
    daily_budget: str | None = None
    """Minor units of the account currency, as a string."""
    lifetime_budget: str | None = None
    created_time: str | None = None
    bid_amount: int | str | None = None
    """An ad set's bid cap or cost cap, in minor units (Meta answers a number)."""
    bid_strategy: str | None = None
    """``LOWEST_COST_WITHOUT_CAP``, ``LOWEST_COST_WITH_BID_CAP``, ``COST_CAP`` or
    ``LOWEST_COST_WITH_MIN_ROAS``: an ad set's own, or its campaign's when the campaign holds the
    budget."""


class BatchReply(msgspec.Struct):
    """One item of a batch reply; ``body`` is the sub-request's JSON as a *string*."""

    code: int
    body: str | None = None
    headers: list[dict[str, str]] | None = None


class Success(msgspec.Struct):
    success: bool = False


CAMPAIGN_FIELDS = (
    "id",
    "name",
    "effective_status",
    "status",
    "daily_budget",
    "lifetime_budget",
    "created_time",
)
AD_ACCOUNT_FIELDS = ("id", "name", "currency", "timezone_name", "account_status")
