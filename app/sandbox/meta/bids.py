"""Bid strategies and bid amounts in the simulated Graph API, as Meta documents them.

* ``bid_strategy`` is one of ``LOWEST_COST_WITHOUT_CAP``, ``LOWEST_COST_WITH_BID_CAP``,
  ``COST_CAP``, ``LOWEST_COST_WITH_MIN_ROAS``. A campaign that holds the budget (Advantage campaign
  budget) holds the strategy too, and its ad sets follow it; otherwise each ad set has its own.
* ``bid_amount`` lives on ad sets only, as an integer in the currency's minor unit: the bid cap of
  ``LOWEST_COST_WITH_BID_CAP`` or the cost per result goal of ``COST_CAP``. The other strategies
  take no amount, and those two need one.
* A campaign has no ``bid_amount``; an ad has neither field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.sandbox.meta.world import SimAccount, SimCampaign

BID_STRATEGIES = frozenset(
    {"LOWEST_COST_WITHOUT_CAP", "LOWEST_COST_WITH_BID_CAP", "COST_CAP", "LOWEST_COST_WITH_MIN_ROAS"}
)
CAPPED = frozenset({"LOWEST_COST_WITH_BID_CAP", "COST_CAP"})
"""The strategies that need, and take, a ``bid_amount``."""


class BidRefused(Exception):
    """A bid write Meta refuses with (#100)."""


def holds_budget(campaign: SimCampaign | None) -> bool:
    return campaign is not None and (
        campaign.daily_budget is not None or campaign.lifetime_budget is not None
    )


def parent(account: SimAccount, obj: SimCampaign) -> SimCampaign | None:
    return account.campaigns.get(obj.campaign_id or "") if obj.edge != "campaigns" else None


def effective_strategy(account: SimAccount, obj: SimCampaign) -> str | None:
    """The strategy an object bids with: its campaign's when the campaign holds the budget."""
    if obj.edge == "adsets":
        campaign = parent(account, obj)
        if holds_budget(campaign) and campaign is not None and campaign.bid_strategy:
            return campaign.bid_strategy
    if obj.edge == "ads":
        return None
    return obj.bid_strategy or "LOWEST_COST_WITHOUT_CAP"


def writable(obj: SimCampaign) -> set[str]:
    """The bid fields an update of this object may carry."""
    if obj.edge == "adsets":
        return {"bid_amount", "bid_strategy"}
    if obj.edge == "campaigns":
        return {"bid_strategy"}
    return set()


def check(account: SimAccount, obj: SimCampaign, changes: dict[str, str]) -> None:
    """Raise :class:`BidRefused` for a bid write Meta would refuse."""
    strategy = changes.get("bid_strategy")
    if strategy is not None:
        if strategy not in BID_STRATEGIES:
            raise BidRefused(f"(#100) Param bid_strategy must be one of {sorted(BID_STRATEGIES)}")
        if obj.edge == "campaigns" and not holds_budget(obj):
            raise BidRefused(
                "(#100) The campaign does not use Advantage campaign budget: set the bid "
                "strategy on its ad sets"
            )
        if obj.edge == "adsets" and holds_budget(parent(account, obj)):
            raise BidRefused(
                "(#100) The ad set's campaign uses Advantage campaign budget: set the bid "
                "strategy on the campaign"
            )
    if "bid_amount" in changes:
        raw = changes["bid_amount"]
        if not raw.isdigit() or int(raw) <= 0:
            raise BidRefused("(#100) Invalid parameter: bid_amount must be a positive integer")
    target = strategy or effective_strategy(account, obj)
    if "bid_amount" in changes and target not in CAPPED:
        raise BidRefused(
            f"(#100) bid_amount is not supported with the bid strategy {target}: only "
            "LOWEST_COST_WITH_BID_CAP and COST_CAP take one"
        )
    if strategy in CAPPED and obj.edge == "campaigns":
        bare = [
            a.id for a in account.adsets.values() if a.campaign_id == obj.id and not a.bid_amount
        ]
        if bare:
            raise BidRefused(
                f"(#100) bid_amount is required with the bid strategy {strategy}: ad sets "
                f"{', '.join(bare)} have none (set adset_bid_amounts)"
            )
    elif strategy in CAPPED and "bid_amount" not in changes and obj.bid_amount is None:
        raise BidRefused(f"(#100) bid_amount is required with the bid strategy {strategy}")


def apply(obj: SimCampaign, changes: dict[str, str]) -> None:
    if "bid_strategy" in changes:
        obj.bid_strategy = changes["bid_strategy"]
        if changes["bid_strategy"] not in CAPPED and "bid_amount" not in changes:
            obj.bid_amount = None
    if "bid_amount" in changes:
        obj.bid_amount = int(changes["bid_amount"])
