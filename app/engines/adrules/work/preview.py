"""Preview (spec AR-4): evaluate a rule now against one ad account and show, per campaign, every
condition's value and result and the action that *would* run — reading only.

This module holds a :class:`~app.integrations.meta.reader.MetaReader` and nothing that writes: the
campaigns are listed with the rule's pre-filters, Insights and custom metrics are read exactly as a
run reads them (the sheet copy is not even refreshed), cooldowns are checked against the records,
and the change an action would make is worked out by the pure planners of :mod:`.changes` from the
values just read. An import-linter contract keeps the Graph writer out of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.engines.adrules import accounts as account_service
from app.engines.adrules import records, rule_views
from app.engines.adrules.catalogue import LEVEL_EDGES, LEVEL_FIELDS
from app.engines.adrules.claim.fetch import Fetched, FetchFailed, fetch_campaigns
from app.engines.adrules.claim.prefilters import to_filtering
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.documents import load_prefilters, load_schedule
from app.engines.adrules.errors import meta_refusal
from app.engines.adrules.models import Rule
from app.engines.adrules.payloads import CampaignEntity
from app.engines.adrules.schemas import (
    Action,
    ActivateCampaign,
    AppendToName,
    DecreaseBudget,
    IncreaseBudget,
    PauseCampaign,
    RemoveFromName,
    Rename,
    SetBudget,
    TaskDocument,
)
from app.engines.adrules.work.changes import (
    ActionFailed,
    Change,
    action_parameters,
    plan_budget,
    plan_name,
    plan_status,
)
from app.engines.adrules.work.cooldown import LastExecution, check_cooldown
from app.engines.adrules.work.evaluate import CampaignFacts, evaluate_conditions
from app.engines.adrules.work.facts import Gathered, gather
from app.engines.adrules.work.guards import opposing_rules
from app.engines.adrules.work.metrics import local_time
from app.engines.adrules.work.sheets_values import (
    CustomMetricSource,
    workspace_credentials,
)
from app.errors import Conflict
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.schemas import Schema

MAX_CAMPAIGNS = 500
"""A preview evaluates at most this many campaigns (the first ones Meta lists)."""


class PreviewCondition(Schema, kw_only=True):
    text: str
    seen: str | None
    compared: str | None
    passed: bool
    reason: str | None = None
    source: str | None = None
    """A custom metric's rows: ``live``, ``cache`` or ``copy`` (the database copy)."""
    source_age_seconds: int | None = None
    source_note: str | None = None
    sheet_failed: bool = False


class PreviewTask(Schema, kw_only=True):
    task_id: int
    task_name: str
    action: str
    parameters: dict[str, Any]
    passed: bool
    conditions: list[PreviewCondition]
    would: str
    """``act``, ``skip`` (cooldown), ``nothing`` (conditions not met, or nothing to change), ``error``."""
    reason: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    next_allowed_at: datetime | None = None


class PreviewCampaign(Schema, kw_only=True):
    id: str
    name: str
    effective_status: str
    error: str | None = None
    tasks: list[PreviewTask]


class PreviewResult(Schema, kw_only=True):
    rule_id: int
    ad_account_id: int
    account_meta_id: str
    evaluated_at: datetime
    campaigns: list[PreviewCampaign]
    total_campaigns: int
    truncated: bool
    graph_calls: int
    """Batch calls made for Insights (listing pages not included)."""
    timezone: str = "UTC"
    """The zone the evaluation used: the rule's, else the ad account's (AR-23a)."""
    warnings: list[str] = []
    """Other active rules acting on this account's budgets in the opposite direction."""


def _would_change(
    action: Action,
    campaign: CampaignEntity,
    currency: str,
    rule_name: str,
    now: datetime,
    timezone: str,
    level: str = "campaign",
) -> Change | None:
    """What the action would write, from the values just listed (no live re-read: they are live)."""
    if isinstance(action, PauseCampaign | ActivateCampaign):
        return plan_status(action, campaign.effective_status, level)
    if isinstance(action, IncreaseBudget | DecreaseBudget | SetBudget):
        return plan_budget(
            action,
            campaign.daily_budget,
            currency,
            lifetime_minor=campaign.lifetime_budget,
            level=level,
        )
    if isinstance(action, Rename | AppendToName | RemoveFromName):
        return plan_name(
            action,
            campaign.name,
            rule=rule_name,
            date=f"{local_time(now, timezone):%Y-%m-%d}",
            campaign_id=campaign.id,
        )
    return None  # notifications and log_only change nothing on Meta


def _preview_campaign(
    campaign: CampaignEntity,
    gathered: Gathered,
    tasks: Sequence[TaskDocument],
    last: dict[tuple[int, str], LastExecution],
    *,
    now: datetime,
    currency: str,
    rule_name: str,
    zone: str,
    level: str,
) -> PreviewCampaign:
    """What each task would do to one campaign now, or why its Insights could not be read."""
    error = gathered.errors.get(campaign.id)
    facts = gathered.facts.get(campaign.id)
    if error is not None or facts is None:
        reason = error.describe() if isinstance(error, MetaError) else "no data"
        return PreviewCampaign(
            id=campaign.id,
            name=campaign.name,
            effective_status=campaign.effective_status,
            error=f"Insights read failed: {reason}",
            tasks=[],
        )
    items = [
        _preview_task(
            task,
            campaign,
            facts,
            last.get((task.id, campaign.id)),
            now=now,
            currency=currency,
            rule_name=rule_name,
            zone=zone,
            level=level,
        )
        for task in tasks
    ]
    return PreviewCampaign(
        id=campaign.id,
        name=campaign.name,
        effective_status=campaign.effective_status,
        tasks=items,
    )


def _preview_task(
    task: TaskDocument,
    campaign: CampaignEntity,
    facts: CampaignFacts,
    last: LastExecution | None,
    *,
    now: datetime,
    currency: str,
    rule_name: str,
    zone: str,
    level: str,
) -> PreviewTask:
    """What one task would do to one campaign now: its conditions, then its cooldown (``last``:
    its last execution there), then the change its action would make."""
    evaluation = evaluate_conditions(task.conditions, task.group, facts)
    item = PreviewTask(
        task_id=task.id,
        task_name=task.name,
        action=str(type(task.action).__struct_config__.tag),
        parameters=action_parameters(task.action),
        passed=evaluation.passed,
        conditions=[
            PreviewCondition(
                text=c.text,
                seen=c.seen,
                compared=c.compared,
                passed=c.passed,
                reason=c.reason,
                source=c.source,
                source_age_seconds=c.source_age_seconds,
                source_note=c.source_note,
                sheet_failed=c.sheet_failed,
            )
            for c in evaluation.conditions
        ],
        would="nothing",
        reason=None if evaluation.passed else "conditions not met",
    )
    if not evaluation.passed:
        if any(c.sheet_failed and not c.passed for c in evaluation.conditions):
            item.would, item.reason = "error", "custom metric sheet unavailable"
        return item
    verdict = check_cooldown(last, task.cooldown, now)
    if not verdict.allowed:
        item.would, item.reason, item.next_allowed_at = (
            "skip",
            verdict.reason,
            verdict.next_allowed_at,
        )
        return item
    try:
        change = _would_change(task.action, campaign, currency, rule_name, now, zone, level)
    except ActionFailed as exc:
        item.would, item.reason = "error", str(exc)
        return item
    if change is not None and change.write is None:
        item.reason = change.skip or change.noop
    else:
        item.would = "act"
        if change is not None:
            item.before, item.after = change.before, change.after
    return item


async def _list_campaigns(
    deps: AdRulesDeps, reader: MetaReader, account_meta_id: str, rule: Rule
) -> Fetched:
    """The rule's objects on the account, listed as a run lists them."""
    try:
        return await fetch_campaigns(
            reader,
            account_meta_id,
            to_filtering(load_prefilters(rule.prefilters)),
            sleep=deps.sleep,
            delays=deps.preview_retry_delays,
            edge=LEVEL_EDGES[rule.level],
            fields=LEVEL_FIELDS[rule.level],
        )
    except FetchFailed as exc:
        raise meta_refusal("the campaigns could not be listed", exc.error) from None


async def _custom_metrics(deps: AdRulesDeps, workspace_id: int) -> CustomMetricSource:
    """The custom metrics' sheets, read as a run reads them, keeping no copy."""
    return CustomMetricSource(
        db=deps.db,
        clock=deps.clock,
        client=deps.sheets,
        cache=deps.sheet_cache,
        workspace_id=workspace_id,
        credentials=await workspace_credentials(
            deps.db, deps.secrets, workspace_id, deps.token_minter
        ),
        save_copies=False,
        copy_max_age=deps.sheet_copy_max_age,
    )


async def preview_rule(
    deps: AdRulesDeps, *, workspace_id: int, rule_id: int, ad_account_id: int
) -> PreviewResult:
    now = deps.clock.now()
    async with deps.db.read() as session:
        view = await rule_views.view_rule(session, workspace_id=workspace_id, rule_id=rule_id)
        account = await account_service.get_account(session, workspace_id, ad_account_id)
        token = await account_service.require_token(session, deps.secrets, workspace_id)
        warnings = await opposing_rules(
            session, workspace_id=workspace_id, rule_id=rule_id, ad_account_id=ad_account_id
        )
    if not account.active:
        raise Conflict(
            "activate the ad account first: nothing is read from an inactive account",
            code="ad_account_inactive",
        )
    tasks: Sequence[TaskDocument] = view.tasks
    reader = deps.reader(token)
    level = view.rule.level
    fetched = await _list_campaigns(deps, reader, account.meta_id, view.rule)
    campaigns = fetched.campaigns[:MAX_CAMPAIGNS]
    zone_used = load_schedule(view.rule.schedule).timezone or account.timezone_name or "UTC"
    gathered = await gather(
        tasks=tasks,
        campaigns=campaigns,
        currency=account.currency,
        timezone=zone_used,
        now=now,
        reader=reader,
        custom=await _custom_metrics(deps, workspace_id),
        mode=deps.insights_mode,
        account_id=account.meta_id,
        sleep=deps.sleep,
        timer=deps.clock.monotonic,
        retry_delays=deps.preview_retry_delays,
    )
    # A person is waiting for the preview: a long throttle is shown as an error, not waited out.
    gathered.fail_unread()
    async with deps.db.read() as session:
        last = await records.last_executions(
            session, [t.id for t in tasks], [c.id for c in campaigns]
        )
    out = [
        _preview_campaign(
            campaign,
            gathered,
            tasks,
            last,
            now=now,
            currency=account.currency,
            rule_name=view.rule.name,
            zone=zone_used,
            level=level,
        )
        for campaign in campaigns
    ]
    return PreviewResult(
        rule_id=rule_id,
        ad_account_id=ad_account_id,
        account_meta_id=account.meta_id,
        evaluated_at=now,
        campaigns=out,
        total_campaigns=len(fetched.campaigns),
        truncated=len(fetched.campaigns) > MAX_CAMPAIGNS,
        graph_calls=gathered.stats.calls,
        timezone=zone_used,
        warnings=warnings,
    )
