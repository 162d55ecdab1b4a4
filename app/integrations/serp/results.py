"""Turning a decoded provider task into the client's result structs.

Shared by ``task_get`` answers (:class:`~app.integrations.serp.client.SerpClient`) and the
provider's postbacks, which carry the same envelope.
"""

from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlsplit

from app.integrations.serp.codes import task_state
from app.integrations.serp.structs import (
    KeywordDataResult,
    KeywordVolume,
    MonthlySearch,
    SerpItem,
    SerpSource,
    SerpTaskResult,
)
from app.integrations.serp.wire import (
    WireKeyword,
    WireReference,
    WireSerpItem,
    WireSerpResult,
    WireTask,
)


def serp_result(task: WireTask[WireSerpResult], task_id: str = "") -> SerpTaskResult:
    """The SERP result of ``task`` (``task_id`` stands in when the provider omitted the id)."""
    page = task.result[0] if task.result else None
    return SerpTaskResult(
        task_id=task.id or task_id,
        tag=task.data_str("tag"),
        status_code=task.status_code,
        state=task_state(task.status_code),
        keyword=page.keyword if page and page.keyword else task.data_str("keyword"),
        items=[
            SerpItem(
                type=item.type,
                rank_group=item.rank_group,
                rank_absolute=item.rank_absolute,
                domain=item.domain,
                url=item.url,
                title=item.title,
                sources=_sources(item),
            )
            for item in ((page.items or []) if page else [])
        ],
        cost=task.cost or Decimal(0),
        status_message=task.status_message,
        item_types=list(page.item_types or []) if page else [],
    )


def keyword_data_result(task: WireTask[WireKeyword], task_id: str = "") -> KeywordDataResult:
    """The keyword-data result of ``task`` (``task_id`` stands in for an omitted id)."""
    return KeywordDataResult(
        task_id=task.id or task_id,
        tag=task.data_str("tag"),
        status_code=task.status_code,
        state=task_state(task.status_code),
        rows=[_volume(row) for row in task.result or []],
        cost=task.cost or Decimal(0),
        status_message=task.status_message,
    )


def _volume(row: WireKeyword) -> KeywordVolume:
    return KeywordVolume(
        keyword=row.keyword,
        search_volume=row.search_volume,
        competition=row.competition,
        cpc=row.cpc,
        monthly_searches=[
            MonthlySearch(year=m.year, month=m.month, search_volume=m.search_volume)
            for m in row.monthly_searches or []
        ],
        competition_index=row.competition_index,
    )


def _sources(item: WireSerpItem) -> tuple[SerpSource, ...]:
    """The pages an item cites or is made of: an AI Overview's ``references`` (on the item, or
    on its elements when the provider nests them), a carousel's elements, the answers of "people
    also ask" (``expanded_element``). A reference's domain is taken from its URL when absent."""
    found: list[WireReference] = list(item.references or [])
    for element in item.items or []:
        found.extend(element.references or [])
        found.extend(element.expanded_element or [])
        if element.url:
            found.append(WireReference(domain=element.domain, url=element.url, title=element.title))
    out: list[SerpSource] = []
    seen: set[str] = set()
    for ref in found:
        domain = ref.domain or _host(ref.url)
        key = ref.url or domain or ""
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(
            SerpSource(domain=domain.lower() if domain else None, url=ref.url, title=ref.title)
        )
    return tuple(out)


def _host(url: str | None) -> str | None:
    if not url:
        return None
    host = urlsplit(url).hostname
    return host.removeprefix("www.") if host else None
