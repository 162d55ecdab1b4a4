"""Pre-filters serialised into the Graph API ``filtering`` parameter (spec AR-11), so Meta narrows
the campaign list before anything crosses the wire: ids with ``IN``, the name with ``CONTAIN``,
effective statuses with ``IN`` / ``NOT_IN``."""

from __future__ import annotations

from typing import Any

from app.engines.adrules.schemas import PreFilters


def to_filtering(prefilters: PreFilters) -> list[dict[str, Any]]:
    """The ``filtering`` entries for ``prefilters`` (empty when nothing narrows the list)."""
    entries: list[dict[str, Any]] = []
    if prefilters.campaign_ids:
        entries.append(
            {"field": "id", "operator": "IN", "value": sorted(set(prefilters.campaign_ids))}
        )
    if prefilters.name_contains is not None and prefilters.name_contains.strip():
        entries.append(
            {"field": "name", "operator": "CONTAIN", "value": prefilters.name_contains.strip()}
        )
    status = prefilters.effective_status
    if status is not None:
        entries.append(
            {
                "field": "effective_status",
                "operator": "IN" if status.operator == "in" else "NOT_IN",
                "value": sorted(set(status.values)),
            }
        )
    return entries
