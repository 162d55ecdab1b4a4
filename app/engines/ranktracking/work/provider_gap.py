"""The provider's bill against the price list (RT-37, RT-53): a drift never passes unseen.

The settlement writes the reconciliation entry in the ledger (:func:`.ledger.settle`: whatever the
provider billed above the charge, tasks without a result included, so that settlements plus
reconciliation add up to the bill). This module compares the **unit price** the provider billed
with the price list's and writes an activity-feed row a person can read when it differs by more
than ``RT_COST_TOLERANCE_PERCENT``, in either direction — a price rise or a stale exchange rate
(the organisation absorbs the difference) as much as a price list above the provider's (customers
over-charged) — and counts both in Prometheus metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from prometheus_client import Counter

from app.db.session import WriteSession
from app.engines.ranktracking.amounts import exact_eur
from app.engines.ranktracking.ledger import Settlement
from app.engines.ranktracking.models import Run
from app.engines.ranktracking.records import activity

PROVIDER_GAPS = Counter(
    "sweepline_ranktracking_provider_cost_gaps_total",
    "Settlements where the provider billed more than the price list charged",
    ["data_type", "above_reservation"],
)
PROVIDER_GAP_EUR = Counter(
    "sweepline_ranktracking_provider_cost_gap_eur_total",
    "EUR the provider billed above the price list's charge (recorded, not charged)",
    ["data_type"],
)


@dataclass(frozen=True, slots=True)
class UnitPrice:
    """The provider's bill of one child run per billed unit, beside the price list's (RT-53)."""

    units: int
    """Tasks the provider created and billed (a SERP check per keyword and device, or a
    keyword-data task), measured or not: a keyword with no results is billed all the same."""
    provider_usd: Decimal
    list_usd: Decimal

    @property
    def drift_percent(self) -> Decimal:
        """How far the provider's unit price is from the list's, in % of the list's (+ above)."""
        if self.list_usd == 0:
            return Decimal(0) if self.provider_usd == 0 else Decimal(100)
        return (self.provider_usd - self.list_usd) / self.list_usd * 100


PROVIDER_PRICE_DRIFTS = Counter(
    "sweepline_ranktracking_provider_price_drifts_total",
    "Settlements whose billed unit price differs from the price list beyond the tolerance",
    ["data_type", "direction"],
)


def _usd(amount: Decimal) -> str:
    return f"{amount.normalize():f}"


def record(
    session: WriteSession,
    run: Run,
    settlement: Settlement,
    now: datetime,
    *,
    unit: UnitPrice | None,
    tolerance_percent: Decimal,
) -> None:
    """Count a provider cost above the charge (metrics), and raise a feed row when the unit price
    the provider billed drifted beyond ``tolerance_percent`` from the price list, either way.

    Per billed unit, so that tasks billed without a result (a keyword with no results is billed
    by the provider, not charged, RT-24) raise nothing while the prices match: a gap above the
    charge alone said nothing about the prices. Above the list: the price list (or the
    ``RT_EUR_PER_USD`` rate it is converted with) is behind and the organisation absorbs the
    difference; below: customers are charged more than the provider bills."""
    if settlement.gap_micros > 0:
        PROVIDER_GAPS.labels(run.data_type, str(settlement.above_reservation).lower()).inc()
        PROVIDER_GAP_EUR.labels(run.data_type).inc(settlement.gap_micros / 1_000_000)
    if unit is None or unit.units <= 0:
        return
    drift = unit.drift_percent
    if abs(drift) <= tolerance_percent:
        return
    above = drift > 0
    what = "check" if run.data_type == "serp" else "keyword-data task"
    consequence = (
        "the price list is behind: the difference is not charged"
        if above
        else "customers are charged more than the provider bills"
    )
    PROVIDER_PRICE_DRIFTS.labels(run.data_type, "above" if above else "below").inc()
    activity.record_run_outcome(
        session,
        run,
        kind=activity.RECONCILIATION,
        code="provider_price_above_list" if above else "provider_price_below_list",
        message=(
            f"{activity.run_label(run)}: the provider billed {_usd(unit.provider_usd)} USD per "
            f"{what} ({unit.units} billed, {run.provider_cost} USD), the price list "
            f"{_usd(unit.list_usd)} USD: {abs(drift):.1f}% {'above' if above else 'below'} "
            f"(tolerance {tolerance_percent}%); {consequence}. Check the provider's prices "
            f"and RT_EUR_PER_USD. Charged {exact_eur(settlement.charged_micros)} EUR"
        ),
        now=now,
    )
