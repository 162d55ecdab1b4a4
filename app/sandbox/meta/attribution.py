"""Attribution windows in the simulated Insights API (``action_attribution_windows``).

A request may name Meta's windows (``1d_click``, ``7d_click``, ``28d_click``, ``1d_view``,
``1d_ev``; ``7d_view`` and ``28d_view`` were retired in January 2026 and are refused). Only
conversion metrics depend on the window: their ``value`` is what the windows together count, and
each entry carries one figure per window asked. Without windows a row is what the ad sets' own
(unified) setting counts — here 7-day click with 1-day view.

The simulator's conversions are split by a fixed share per window, so a test can tell which
windows a request carried from the numbers alone.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import msgspec

SHARES: dict[str, Decimal] = {
    "1d_click": Decimal("0.55"),
    "7d_click": Decimal("0.85"),
    "28d_click": Decimal("1.00"),
    "1d_view": Decimal("0.10"),
    "1d_ev": Decimal("0.05"),
}
"""Share of all attributable conversions each window counts (click windows nest)."""
RETIRED = frozenset({"7d_view", "28d_view"})
UNIFIED = ("7d_click", "1d_view")
"""What a row counts when no window is asked (the ad sets' own setting)."""
CONVERSIONS = frozenset(
    {
        "purchase",
        "offsite_conversion.fb_pixel_purchase",
        "add_to_cart",
        "initiate_checkout",
        "lead",
        "complete_registration",
    }
)


def parse_windows(raw: str | None) -> list[str]:
    """The windows of a request (a JSON array or a comma-separated list); raises ``ValueError``
    with Meta's message for an unknown or retired one."""
    if not raw:
        return []
    try:
        decoded = msgspec.json.decode(raw) if raw.startswith("[") else raw.split(",")
    except msgspec.DecodeError:
        raise ValueError("(#100) action_attribution_windows must be a list") from None
    windows = [str(w).strip() for w in decoded if str(w).strip()]
    for window in windows:
        if window in RETIRED:
            raise ValueError(
                f"(#100) The attribution window {window} is no longer supported; use 1d_view"
            )
        if window not in SHARES and window != "default":
            raise ValueError(f"(#100) action_attribution_windows: unknown value {window!r}")
    return windows


def _share(windows: list[str]) -> Decimal:
    clicks = [SHARES[w] for w in windows if w.endswith("_click")]
    rest = [SHARES[w] for w in windows if w in SHARES and not w.endswith("_click")]
    return max(clicks, default=Decimal(0)) + sum(rest, Decimal(0))


def apply_windows(row: dict[str, Any], windows: list[str], money_decimals: int) -> dict[str, Any]:
    """The row as the windows count it (``default`` or none: the row unchanged)."""
    windows = [w for w in windows if w != "default"]
    if not windows:
        return row
    factor = _share(windows) / _share(list(UNIFIED))
    quantum = Decimal(1).scaleb(-money_decimals)
    spend = Decimal(str(row.get("spend", "0")))
    out = dict(row)
    counts: dict[str, Decimal] = {}

    def scaled(entries: list[dict[str, Any]], money: bool) -> list[dict[str, Any]]:
        result = []
        for entry in entries:
            kind = entry["action_type"]
            if kind not in CONVERSIONS:
                result.append(entry)
                continue
            value = Decimal(entry["value"]) * factor
            value = value.quantize(quantum, ROUND_HALF_UP) if money else value.to_integral_value()
            if not money:
                counts[kind] = value
            result.append({"action_type": kind, "value": str(value)})
        return result

    if "actions" in out:
        out["actions"] = scaled(out["actions"], money=False)
    if "action_values" in out:
        out["action_values"] = scaled(out["action_values"], money=True)
        value = next(
            (Decimal(e["value"]) for e in out["action_values"] if e["action_type"] == "purchase"),
            None,
        )
        if "purchase_roas" in out and value is not None and spend:
            roas = (value / spend).quantize(Decimal("0.000001"), ROUND_HALF_UP)
            out["purchase_roas"] = [{"action_type": "omni_purchase", "value": str(roas)}]
    if "cost_per_action_type" in out:
        out["cost_per_action_type"] = _costs(out["cost_per_action_type"], counts, spend, quantum)
    return out


def _costs(
    entries: list[dict[str, Any]], counts: dict[str, Decimal], spend: Decimal, quantum: Decimal
) -> list[dict[str, Any]]:
    """Cost per conversion recomputed from the windows' counts (none when the count is 0)."""
    cost = []
    for entry in entries:
        count = counts.get(entry["action_type"])
        if count is None:
            cost.append(entry)
        elif count:
            per = (spend / count).quantize(quantum, ROUND_HALF_UP)
            cost.append({"action_type": entry["action_type"], "value": str(per)})
    return cost
