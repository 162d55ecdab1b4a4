"""The Graph API's usage headers: how close the app, the ad account and the business use case are
to their rate limits, and how long to wait when one is exceeded.

``x-app-usage`` and ``x-ad-account-usage`` carry percentages; ``x-business-use-case-usage`` maps a
business id to a list of entries with ``estimated_time_to_regain_access`` in minutes. All three are
JSON in a header: untrusted input, decoded leniently (a broken header reads as "no information").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

APP_USAGE = "x-app-usage"
AD_ACCOUNT_USAGE = "x-ad-account-usage"
BUC_USAGE = "x-business-use-case-usage"

_PERCENT_KEYS = ("call_count", "total_cputime", "total_time", "acc_id_util_pct")


@dataclass(frozen=True, slots=True)
class Usage:
    """The highest usage percentage any header reported, and the longest wait Meta asked for."""

    highest_percent: float = 0.0
    regain_access_seconds: float = 0.0

    @property
    def throttled(self) -> bool:
        return self.regain_access_seconds > 0 or self.highest_percent >= 100


def _json(raw: str | None) -> Any:
    if not raw:
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None


def _percent(entry: Any) -> float:
    if not isinstance(entry, dict):
        return 0.0
    best = 0.0
    for key in _PERCENT_KEYS:
        value = entry.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            best = max(best, float(value))
    return best


def parse_usage(headers: Mapping[str, str]) -> Usage:
    """Read the three usage headers (case-insensitive mapping, e.g. ``httpx.Headers``)."""
    highest = max(
        _percent(_json(headers.get(APP_USAGE))), _percent(_json(headers.get(AD_ACCOUNT_USAGE)))
    )
    regain_minutes = 0.0
    buc = _json(headers.get(BUC_USAGE))
    if isinstance(buc, dict):
        for entries in buc.values():
            for entry in entries if isinstance(entries, list) else []:
                highest = max(highest, _percent(entry))
                wait = (
                    entry.get("estimated_time_to_regain_access")
                    if isinstance(entry, dict)
                    else None
                )
                if isinstance(wait, int | float) and not isinstance(wait, bool):
                    regain_minutes = max(regain_minutes, float(wait))
    return Usage(highest_percent=highest, regain_access_seconds=regain_minutes * 60.0)
