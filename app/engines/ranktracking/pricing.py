"""The price list and the quotes derived from it (RT-19, RT-37). Pure functions.

The default figures are the provider's own (DataForSEO, billed in USD; sources in
``docs/ranktracking-pricing.md``): a SERP is billed per results page of 10 — the first page at the
queue's base price, each further page at 0.75 of it, so depth 100 costs 1 + 9 × 0.75 pages — the
same on desktop and mobile; a keyword-data task is billed per task of up to 1,000 keywords. The
organisation balance is kept in EUR, so every USD figure is converted with the configured rate
(``RT_EUR_PER_USD``).

Amounts are integer **micro-euros** (1 EUR = 1,000,000): a top-100 check costs 0.00465 USD, far
below a cent, and a sum of 1,000 settlements must be exact. A quote is rounded **up** to the micro
so a reservation always covers its charge; only displays and the monthly estimate round to the cent
(:mod:`.amounts`). Floats never appear.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

from app.engines.ranktracking.amounts import MICROS_PER_CENT, MICROS_PER_EUR
from app.settings import RankTrackingSettings

STANDARD = "standard"
PRIORITY = "priority"
QUEUES = (STANDARD, PRIORITY)
DEVICES = ("desktop", "mobile")
DEPTHS = (10, 100)
PACKAGES = ("volume", "cpc", "trends")

KEYWORDS_PER_DATA_TASK = 1000
"""The provider's limit of keywords in one keyword-data task (one task = one billed unit)."""


def micros_up(eur: Decimal) -> int:
    """EUR to whole micro-euros, rounded up (a reservation must cover the charge)."""
    return int((eur * MICROS_PER_EUR).to_integral_value(rounding=ROUND_CEILING))


def usd_to_micros(usd: Decimal, eur_per_usd: Decimal) -> int:
    """A provider amount in USD as micro-euros at the configured rate, rounded up."""
    return micros_up(usd * eur_per_usd)


def fraction_cents_up(micros: int, factor: Fraction) -> int:
    """``micros × factor`` in whole cents, rounded up (exact rational arithmetic): the monthly
    estimate (RT-19)."""
    return math.ceil(Fraction(micros) * factor / MICROS_PER_CENT)


@dataclass(frozen=True, slots=True)
class PriceList:
    """The provider's prices in USD and the rate that turns them into the balance's EUR."""

    serp_page_standard_usd: Decimal
    serp_page_priority_usd: Decimal
    extra_page_factor: Decimal
    mobile_factor: Decimal
    data_task_usd: Decimal
    """One keyword-data task, whatever its packages."""
    packages_usd: dict[str, Decimal]
    """What each package adds to a keyword-data task."""
    eur_per_usd: Decimal
    maps_task_usd: Decimal = Decimal("0.0006")
    """One Google Maps search, standard queue."""
    maps_task_priority_usd: Decimal = Decimal("0.0012")

    @classmethod
    def from_settings(cls, s: RankTrackingSettings) -> PriceList:
        return cls(
            serp_page_standard_usd=s.price_serp_page_usd,
            serp_page_priority_usd=s.price_serp_page_priority_usd,
            extra_page_factor=s.price_extra_page_factor,
            mobile_factor=s.mobile_factor,
            data_task_usd=s.price_kd_task_usd,
            packages_usd={
                "volume": s.price_kd_volume_usd,
                "cpc": s.price_kd_cpc_usd,
                "trends": s.price_kd_trends_usd,
            },
            eur_per_usd=s.eur_per_usd,
            maps_task_usd=s.price_maps_task_usd,
            maps_task_priority_usd=s.price_maps_task_priority_usd,
        )

    def serp_unit_usd(self, *, depth: int, queue: str, device: str) -> Decimal:
        """USD the provider bills for one keyword checked once on one device."""
        page = self.serp_page_priority_usd if queue == PRIORITY else self.serp_page_standard_usd
        pages = max(1, math.ceil(depth / 10))
        price = page + page * self.extra_page_factor * (pages - 1)
        if device == "mobile":
            price *= self.mobile_factor
        return price

    def serp_unit(self, *, depth: int, queue: str, device: str) -> Decimal:
        """EUR (unrounded) for one keyword checked once on one device."""
        return self.serp_unit_usd(depth=depth, queue=queue, device=device) * self.eur_per_usd

    def keyword_data_task_usd(self, packages: list[str]) -> Decimal:
        """USD for one keyword-data task carrying the chosen packages."""
        return self.data_task_usd + sum((self.packages_usd[p] for p in packages), Decimal(0))

    def keyword_data_unit(self, packages: list[str]) -> Decimal:
        """EUR (unrounded) for one keyword-data task with the chosen packages."""
        return self.keyword_data_task_usd(packages) * self.eur_per_usd

    def serp_micros(self, count: int, *, depth: int, queue: str, device: str) -> int:
        return micros_up(self.serp_unit(depth=depth, queue=queue, device=device) * count)

    def keyword_data_micros(self, count: int, packages: list[str]) -> int:
        """Per task, whatever its number of keywords: ``count`` keywords need
        ⌈count / 1,000⌉ tasks."""
        if count <= 0:
            return 0
        tasks = math.ceil(count / KEYWORDS_PER_DATA_TASK)
        return micros_up(self.keyword_data_unit(packages) * tasks)

    def maps_task_usd_of(self, queue: str) -> Decimal:
        """USD the provider bills for one Google Maps search on ``queue``."""
        return self.maps_task_priority_usd if queue == PRIORITY else self.maps_task_usd

    def maps_micros(self, count: int, *, queue: str) -> int:
        """``count`` Google Maps searches (a geo-grid's cells), rounded up once for the whole."""
        if count <= 0:
            return 0
        return micros_up(self.maps_task_usd_of(queue) * self.eur_per_usd * count)

    def provider_micros(self, usd: Decimal) -> int:
        return usd_to_micros(usd, self.eur_per_usd)


@dataclass(frozen=True, slots=True)
class Quote:
    """One request's price: the micro-euros each child run reserves (one per device, or one)."""

    parts: list[tuple[str | None, int]]
    """``(device, micros)``; the device is None for keyword data."""

    @property
    def total_micros(self) -> int:
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
                (d, prices.serp_micros(count, depth=depth or 10, queue=queue, device=d))
                for d in devices
            ]
        )
    return Quote([(None, prices.keyword_data_micros(count, packages))])


def billable_micros(
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
        return prices.serp_micros(
            billable, depth=depth or 10, queue=queue, device=device or "desktop"
        )
    return prices.keyword_data_micros(billable, packages)
