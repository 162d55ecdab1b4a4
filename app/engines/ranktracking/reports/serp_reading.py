"""What a SERP page says beyond the tracked domain's position, read from the same result items at
no extra provider cost: the competitors' organic positions and the features the tracked domain
owns (a featured snippet, a local pack entry, … whose item links to the site).

A feature is owned when its item names the domain (or a subdomain of it); an item without a domain
(people also ask, an AI overview the provider returns without a source) is never counted as owned.
"""

from __future__ import annotations

from app.integrations.serp import SerpTaskResult

ORGANIC = "organic"
NOT_WINNABLE = frozenset({ORGANIC, "paid"})
"""Page elements that are not a SERP feature a site can win by its content."""


def _host_matches(host: str | None, domain: str) -> bool:
    if not host:
        return False
    host, wanted = host.lower(), domain.strip().lower().removeprefix("www.")
    return host == wanted or host.endswith("." + wanted)


def owned_features(result: SerpTaskResult, domain: str | None) -> list[str]:
    if not domain:
        return []
    return sorted(
        {
            i.type
            for i in result.items
            if i.type not in NOT_WINNABLE and _host_matches(i.domain, domain)
        }
    )


def competitor_positions(result: SerpTaskResult, domains: list[str]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for domain in domains:
        item = result.find(domain)
        out[domain] = item.rank_group if item is not None and item.rank_group > 0 else None
    return out


def winnable(features: list[str], owned: list[str]) -> list[str]:
    """Features on the page the domain does not own (the report shows them only where the domain
    ranks in the top 10, from where such features are usually drawn)."""
    return sorted(set(features) - NOT_WINNABLE - set(owned))
