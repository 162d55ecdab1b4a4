"""The EUR price list and the quotes derived from it (RT-19, RT-37). Pure functions.

Prices are ``Decimal`` euros per keyword; every amount that is reserved, charged or shown as a total
is integer cents, rounded **up** so a quote never under-reserves. Floats never appear.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

from app.settings import RankTrackingSettings

STANDARD = "standard"
PRIORITY = "priority"
QUEUES = (STANDARD, PRIORITY)
DEVICES = ("desktop", "mobile")
DEPTHS = (10, 100)
PACKAGES = ("volume", "cpc", "trends")

_CENT = Decimal("0.01")


def cents_up(euros: Decimal) -> int:
    """Euros to whole cents, rounded up (a reservation must cover the charge)."""
    return int((euros / _CENT).to_integral_value(rounding=ROUND_CEILING))


def fraction_cents_up(cents: int, factor: Fraction) -> int:
    """``cents × factor`` rounded up to the cent (exact rational arithmetic)."""
    return math.ceil(Fraction(cents) * factor)


@dataclass(frozen=True, slots=True)
class PriceList:
    serp_top10: Decimal
    serp_top100: Decimal
    priority_factor: Decimal
    mobile_factor: Decimal
    packages: dict[str, Decimal]

    @classmethod
    def from_settings(cls, s: RankTrackingSettings) -> PriceList:
        return cls(
            serp_top10=s.price_serp_eur,
            serp_top100=s.price_serp_top100_eur,
            priority_factor=s.priority_factor,
            mobile_factor=s.mobile_factor,
            packages={
                "volume": s.price_keyword_data_eur,
                "cpc": s.price_kd_cpc_eur,
                "trends": s.price_kd_trends_eur,
            },
        )

    def serp_unit(self, *, depth: int, queue: str, device: str) -> Decimal:
        """EUR for one keyword checked once on one device."""
        price = self.serp_top100 if depth == 100 else self.serp_top10
        if queue == PRIORITY:
            price *= self.priority_factor
        if device == "mobile":
            price *= self.mobile_factor
        return price

    def keyword_data_unit(self, packages: list[str]) -> Decimal:
        """EUR for one keyword with the chosen packages."""
        return sum((self.packages[p] for p in packages), Decimal(0))

    def serp_cents(self, count: int, *, depth: int, queue: str, device: str) -> int:
        return cents_up(self.serp_unit(depth=depth, queue=queue, device=device) * count)

    def keyword_data_cents(self, count: int, packages: list[str]) -> int:
        return cents_up(self.keyword_data_unit(packages) * count)


@dataclass(frozen=True, slots=True)
class Quote:
    """One request's price: the cents each child run reserves (one per device, or one)."""

    parts: list[tuple[str | None, int]]
    """``(device, cents)``; the device is None for keyword data."""

    @property
    def total_cents(self) -> int:
        return sum(c for _, c in self.parts)


def quote(
    prices: PriceList,
    *,
    data_type: str,
    count: int,
    queue: str,
    depth: int | None,
    devices: list[str],
    packages: list[str],
) -> Quote:
    if data_type == "serp":
        return Quote(
            [
                (d, prices.serp_cents(count, depth=depth or 10, queue=queue, device=d))
                for d in devices
            ]
        )
    return Quote([(None, prices.keyword_data_cents(count, packages))])


def billable_cents(
    prices: PriceList,
    *,
    data_type: str,
    billable: int,
    queue: str,
    depth: int | None,
    device: str | None,
    packages: list[str],
) -> int:
    """What one child run is charged for ``billable`` keywords actually measured (RT-24)."""
    if billable <= 0:
        return 0
    if data_type == "serp":
        return prices.serp_cents(
            billable, depth=depth or 10, queue=queue, device=device or "desktop"
        )
    return prices.keyword_data_cents(billable, packages)
