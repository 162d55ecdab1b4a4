"""Turning a decoded provider task into the client's result structs.

Shared by ``task_get`` answers (:class:`~app.integrations.serp.client.SerpClient`) and the
provider's postbacks, which carry the same envelope.
"""

from __future__ import annotations

from decimal import Decimal

from app.integrations.serp.codes import task_state
from app.integrations.serp.structs import (
    KeywordDataResult,
    KeywordVolume,
    MonthlySearch,
    SerpItem,
    SerpTaskResult,
)
from app.integrations.serp.wire import WireKeyword, WireSerpResult, WireTask


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
