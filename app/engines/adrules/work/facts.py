"""Everything conditions need about an account's campaigns, read without changing anything.

Shared by the worker and the preview: the batched Insights read (:mod:`.insights`), the custom
metrics (:mod:`.sheets_values`, one sheet read per run through the 2-minute cache) and the
campaign's own fields, gathered into one :class:`~.evaluate.CampaignFacts` per campaign.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from app.engines.adrules.payloads import CampaignEntity
from app.engines.adrules.schemas import CustomMetricCondition, TaskDocument
from app.engines.adrules.work.evaluate import CampaignFacts, CustomKey, CustomResult
from app.engines.adrules.work.insights import (
    ITEM_RETRY_DELAYS,
    MAX_THROTTLE_WAIT_SECONDS,
    plan_insights,
    read_insights,
)
from app.engines.adrules.work.insights_shapes import BeforeCall, InsightsStats, Sleep
from app.engines.adrules.work.metrics import budget_to_major
from app.engines.adrules.work.sheets_values import (
    CustomMetricSource,
    CustomValue,
    SheetFailure,
    SheetRows,
    index_sheet,
    missing_row,
)
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader


@dataclass(slots=True)
class Gathered:
    facts: dict[str, CampaignFacts] = field(default_factory=dict)
    errors: dict[str, MetaError] = field(default_factory=dict)
    """Campaigns whose Insights could not be read (their tasks are recorded as errors)."""
    insights_seconds: float = 0.0
    custom_seconds: float = 0.0
    stats: InsightsStats = field(default_factory=InsightsStats)
    throttled: MetaError | None = None
    """Meta throttled the account for longer than the read may wait."""
    unread: set[str] = field(default_factory=set)
    """Campaigns left unread by that throttle or a stop (no facts, no error yet)."""
    stopped: str | None = None
    """The platform stop was seen during the read: no Graph call was made after it."""

    def fail_unread(self) -> None:
        """Give up on the unread campaigns: their tasks are recorded with the throttle error."""
        if self.throttled is not None:
            for cid in self.unread:
                self.errors.setdefault(cid, self.throttled)
        self.unread = set()


def custom_keys(tasks: Sequence[TaskDocument]) -> list[CustomKey]:
    keys: dict[CustomKey, None] = {}
    for task in tasks:
        for cond in task.conditions:
            if isinstance(cond, CustomMetricCondition):
                keys[CustomKey.of(cond)] = None
    return list(keys)


@dataclass(frozen=True, slots=True)
class _Sheet:
    """One custom key's sheet for a run: its index by campaign id, or why there is none."""

    index: dict[str, CustomValue]
    rows: SheetRows | None = None
    failure: str | None = None
    sheet_failed: bool = False

    def result(self, campaign_id: str, lookup_column: str) -> CustomResult:
        if self.failure is not None:
            return CustomResult(None, self.failure, sheet_failed=self.sheet_failed)
        found = self.index.get(campaign_id) or missing_row(campaign_id, lookup_column)
        rows = self.rows
        assert rows is not None
        return CustomResult(
            found.value,
            found.error,
            source=rows.source,
            fetched_at=rows.fetched_at,
            note=rows.warning,
        )


async def _custom_values(
    source: CustomMetricSource | None, keys: list[CustomKey]
) -> dict[CustomKey, _Sheet]:
    """Per custom key: the sheet's index and where its rows came from, or the sheet's failure."""
    out: dict[CustomKey, _Sheet] = {}
    for key in keys:
        if source is None:
            out[key] = _Sheet({}, failure="custom metrics are not available here")
            continue
        got = await source.rows(key.spreadsheet_id, key.sheet_name)
        if isinstance(got, SheetFailure):
            out[key] = _Sheet({}, failure=got.message, sheet_failed=True)
            continue
        out[key] = _Sheet(
            index_sheet(got.rows, key.lookup_column, key.value_column, key.locale), rows=got
        )
    return out


async def gather(
    *,
    tasks: Sequence[TaskDocument],
    campaigns: Sequence[CampaignEntity],
    currency: str,
    timezone: str,
    now: datetime,
    reader: MetaReader,
    custom: CustomMetricSource | None,
    mode: str = "packed",
    account_id: str = "",
    sleep: Sleep,
    timer: Callable[[], float],
    retry_delays: tuple[float, ...] = ITEM_RETRY_DELAYS,
    max_wait_seconds: float = MAX_THROTTLE_WAIT_SECONDS,
    windows: Sequence[str] = (),
    before_call: BeforeCall | None = None,
    concurrency: int = 8,
) -> Gathered:
    out = Gathered()
    ids = [c.id for c in campaigns]
    started = timer()
    read = await read_insights(
        reader,
        ids,
        plan_insights(tasks),
        mode=mode,
        account_id=account_id,
        sleep=sleep,
        retry_delays=retry_delays,
        max_wait_seconds=max_wait_seconds,
        statuses=sorted({c.effective_status for c in campaigns if c.effective_status}),
        windows=windows,
        before_call=before_call,
        concurrency=concurrency,
    )
    out.insights_seconds = timer() - started
    out.stats = read.stats
    out.errors = read.errors
    out.throttled = read.throttled
    out.unread = set(read.unread)
    out.stopped = read.stopped
    if read.stopped is not None:
        return out  # nothing is decided after a stop: the sheets are not read either
    started = timer()
    sheets = await _custom_values(custom, custom_keys(tasks))
    out.custom_seconds = timer() - started
    for campaign in campaigns:
        if campaign.id in read.errors or campaign.id in read.unread:
            continue
        values = {
            key: sheet.result(campaign.id, key.lookup_column) for key, sheet in sheets.items()
        }
        out.facts[campaign.id] = CampaignFacts(
            campaign_id=campaign.id,
            name=campaign.name,
            now=now,
            timezone=timezone,
            daily_budget=budget_to_major(campaign.daily_budget, currency),
            lifetime_budget=budget_to_major(campaign.lifetime_budget, currency),
            created_time=campaign.created_time,
            rows=read.rows.get(campaign.id, {}),
            custom=values,
        )
    return out
