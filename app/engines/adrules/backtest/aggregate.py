"""One Insights row for several days, from the daily rows Meta reported.

Counts and money add up. Ratios are averaged weighted by their own denominator — CTR by
impressions, CPC by clicks, a cost per action by that action's count, ROAS by spend — which gives
back exactly the ratio of the summed parts Meta would report for the whole period (up to Meta's
rounding of each day). Reach is not additive (a person reached on two days is one person): summed
over days it is an upper bound, and frequency, unique CTR and CPP built on it are estimates; the
backtest's result says so. A single day's row is used as Meta sent it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

from app.engines.adrules.work.metrics import ActionValue, InsightsRow

QUANTUM = Decimal("0.000001")

SUMMED = ("spend", "impressions", "reach", "clicks", "unique_clicks", "inline_link_clicks")
SUMMED_LISTS = (
    "outbound_clicks",
    "actions",
    "action_values",
    "video_play_actions",
    "video_p25_watched_actions",
    "video_p50_watched_actions",
    "video_p75_watched_actions",
    "video_p100_watched_actions",
    "video_thruplay_watched_actions",
)
RATIOS = {
    "frequency": "reach",
    "ctr": "impressions",
    "unique_ctr": "reach",
    "cpc": "clicks",
    "cpm": "impressions",
    "cpp": "reach",
    "inline_link_click_ctr": "impressions",
    "cost_per_inline_link_click": "inline_link_clicks",
}
"""Scalar ratio → the scalar field it is weighted by."""
RATIO_LISTS_BY_SCALAR = {"outbound_clicks_ctr": "impressions", "purchase_roas": "spend"}
"""Per-action-type ratio → the scalar field every type is weighted by."""
RATIO_LISTS_BY_TYPE = {
    "cost_per_outbound_click": "outbound_clicks",
    "cost_per_action_type": "actions",
    "cost_per_thruplay": "video_thruplay_watched_actions",
}
"""Per-action-type ratio → the per-type counts each type is weighted by."""
APPROXIMATE = frozenset({"reach", "frequency", "unique_clicks", "unique_ctr", "cpp"})
"""Fields whose sum over days is an estimate (they count people, not events)."""


Weight = Callable[[InsightsRow, str], Decimal | None]


def _scalar_weight(field: str) -> Weight:
    def weight(row: InsightsRow, _action_type: str) -> Decimal | None:
        value: Decimal | None = getattr(row, field)
        return value

    return weight


def _type_weight(field: str) -> Weight:
    def weight(row: InsightsRow, action_type: str) -> Decimal | None:
        return _by_type(getattr(row, field)).get(action_type)

    return weight


def _by_type(entries: list[ActionValue] | None) -> dict[str, Decimal]:
    return {e.action_type: e.value for e in entries or ()}


def _entries(values: dict[str, Decimal]) -> list[ActionValue]:
    return [ActionValue(k, v) for k, v in values.items()]


def _weighted(pairs: list[tuple[Decimal, Decimal]]) -> Decimal | None:
    total = sum((w for _, w in pairs), Decimal(0))
    if total == 0:
        return None
    value = sum((r * w for r, w in pairs), Decimal(0)) / total
    return value.quantize(QUANTUM)


def combine(rows: Sequence[InsightsRow], fields: frozenset[str]) -> InsightsRow | None:
    """``fields`` of ``rows`` (one per day with delivery) as one row; None: no delivery."""
    if not rows:
        return None
    if len(rows) == 1:
        return rows[0]
    out: dict[str, object] = {n: _summed(rows, n) for n in SUMMED if n in fields}
    out.update({n: _summed_list(rows, n) for n in SUMMED_LISTS if n in fields})
    out.update({n: _scalar_ratio(rows, n, w) for n, w in RATIOS.items() if n in fields})
    for name, weight in RATIO_LISTS_BY_SCALAR.items():
        if name in fields:
            out[name] = _typed_ratio(rows, name, _scalar_weight(weight))
    for name, counts in RATIO_LISTS_BY_TYPE.items():
        if name in fields:
            out[name] = _typed_ratio(rows, name, _type_weight(counts))
    return InsightsRow(**{k: v for k, v in out.items() if v is not None})  # type: ignore[arg-type]


def _summed(rows: Sequence[InsightsRow], name: str) -> Decimal | None:
    values = [v for v in (getattr(r, name) for r in rows) if v is not None]
    return sum(values, Decimal(0)) if values else None


def _summed_list(rows: Sequence[InsightsRow], name: str) -> list[ActionValue] | None:
    totals: dict[str, Decimal] = {}
    for row in rows:
        for entry in getattr(row, name) or ():
            totals[entry.action_type] = totals.get(entry.action_type, Decimal(0)) + entry.value
    return _entries(totals) if totals else None


def _scalar_ratio(rows: Sequence[InsightsRow], name: str, weight: str) -> Decimal | None:
    pairs = [
        (value, by)
        for row in rows
        if (value := getattr(row, name)) is not None and (by := getattr(row, weight)) is not None
    ]
    return _weighted(pairs)


def _typed_ratio(
    rows: Sequence[InsightsRow],
    name: str,
    weight_of: Weight,
) -> list[ActionValue] | None:
    pairs: dict[str, list[tuple[Decimal, Decimal]]] = {}
    for row in rows:
        for action_type, value in _by_type(getattr(row, name)).items():
            weight = weight_of(row, action_type)
            if weight is not None:
                pairs.setdefault(action_type, []).append((value, weight))
    values = {t: v for t, p in pairs.items() if (v := _weighted(p)) is not None}
    return _entries(values) if values else None
