"""A geo-grid's bill against the price list (RT-123, as RT-53 for runs): the unit price the
provider billed per created task is compared with the list's Maps/Local Finder SERP price, and a
drift beyond ``RT_COST_TOLERANCE_PERCENT``, either way, leaves an activity-feed row a person
reads (a stale price or exchange rate, or customers charged more than the provider bills)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from app.db.session import WriteSession
from app.engines.ranktracking.local.models import GeoGrid
from app.engines.ranktracking.pricing import PriceList
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.work.provider_gap import UnitPrice


def record_drift(
    session: WriteSession,
    scan: GeoGrid,
    *,
    billed: int,
    provider_usd: Decimal,
    prices: PriceList,
    tolerance_percent: Decimal,
    now: datetime,
) -> bool:
    """Write the feed row of a drifted unit price; True when it did."""
    if billed <= 0:
        return False
    unit = UnitPrice(
        units=billed,
        provider_usd=provider_usd / billed,
        list_usd=prices.maps_task_usd_of(scan.queue),
    )
    drift = unit.drift_percent
    if abs(drift) <= tolerance_percent:
        return False
    above = drift > 0
    consequence = (
        "the price list is behind: the difference is not charged"
        if above
        else "customers are charged more than the provider bills"
    )
    activity.record(
        session,
        workspace_id=scan.workspace_id,
        kind=activity.RECONCILIATION,
        code="provider_price_above_list" if above else "provider_price_below_list",
        message=(
            f"Geo-grid {scan.id}: the provider billed {unit.provider_usd.normalize():f} USD per "
            f"search ({billed} billed, {provider_usd} USD), the price list "
            f"{unit.list_usd.normalize():f} USD: {abs(drift):.1f}% "
            f"{'above' if above else 'below'} (tolerance {tolerance_percent}%); {consequence}. "
            "Check RT_PRICE_MAPS_TASK_USD and RT_EUR_PER_USD."
        ),
        now=now,
    )
    return True
