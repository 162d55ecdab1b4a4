"""A provider cost above what the price list charged (RT-37): never silently absorbed.

The settlement writes the reconciliation entry in the ledger (:func:`.ledger.settle`); this module
adds the activity-feed row and counts it in a Prometheus metric, so that an operator sees the price
list falling behind the provider's bill (a price rise, a wrong exchange rate, tasks billed without
a result) before the balances drift from the provider account.
"""

from __future__ import annotations

from datetime import datetime

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


def record(session: WriteSession, run: Run, settlement: Settlement, now: datetime) -> None:
    """Feed row and metric for a settlement whose provider cost exceeded the charge."""
    if settlement.gap_micros <= 0:
        return
    where = "above the reservation" if settlement.above_reservation else "above the charge"
    activity.record_run_outcome(
        session,
        run,
        kind=activity.RECONCILIATION,
        code="provider_cost_above_charge",
        message=(
            f"{activity.run_label(run)}: the provider billed "
            f"{run.provider_cost} USD ({exact_eur(settlement.provider_micros or 0)} EUR), "
            f"{where}; charged {exact_eur(settlement.charged_micros)} EUR, gap "
            f"{exact_eur(settlement.gap_micros)} EUR recorded for reconciliation"
        ),
        now=now,
    )
    PROVIDER_GAPS.labels(run.data_type, str(settlement.above_reservation).lower()).inc()
    PROVIDER_GAP_EUR.labels(run.data_type).inc(settlement.gap_micros / 1_000_000)
