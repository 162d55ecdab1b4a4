"""Pre-filters serialised into the Graph API ``filtering`` parameter (spec AR-11), so Meta narrows
the campaign list before anything crosses the wire: ids with ``IN``, the name with ``CONTAIN``,
effective statuses with ``IN`` / ``NOT_IN``.

Archived and deleted campaigns are never acted on (spec AR-23a). Meta leaves them out of an edge
unless a filter names ``effective_status``; once one does, whatever matches comes back — a
``NOT_IN ["PAUSED"]`` would bring every archived and deleted campaign. So a ``NOT_IN`` always
carries ``ARCHIVED`` and ``DELETED`` too; only an ``IN`` that names them asks for them.
"""

from __future__ import annotations

from typing import Any

from app.engines.adrules.schemas import PreFilters

NOT_DELIVERABLE = frozenset({"ARCHIVED", "DELETED"})
"""Statuses of objects Meta's own rules never see; only a rename (or delete) is allowed on them."""


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
        values: set[str] = set(status.values)
        if status.operator == "not_in":
            values |= NOT_DELIVERABLE
        entries.append(
            {
                "field": "effective_status",
                "operator": "IN" if status.operator == "in" else "NOT_IN",
                "value": sorted(values),
            }
        )
    return entries


def targets_not_deliverable(prefilters: PreFilters) -> frozenset[str]:
    """The non-deliverable statuses a rule explicitly asks for (an ``IN`` naming them)."""
    status = prefilters.effective_status
    if status is None or status.operator != "in":
        return frozenset()
    return NOT_DELIVERABLE & frozenset(status.values)
