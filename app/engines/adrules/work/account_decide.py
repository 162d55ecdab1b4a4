"""The first phase of an account job: every task decided on every campaign — data read, conditions,
cooldown, what Meta lets it touch — ending in a record or in what the action phase needs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.engines.adrules.payloads import CampaignEntity, evaluation_zone
from app.engines.adrules.run_models import RECORD_ERROR, RECORD_NOT_EXECUTED, RECORD_SKIPPED
from app.engines.adrules.schemas import TaskDocument
from app.engines.adrules.work.account_rows import record_row, why_not
from app.engines.adrules.work.account_state import AccountRun, Ready
from app.engines.adrules.work.changes import not_deliverable_reason, object_noun
from app.engines.adrules.work.cooldown import LastExecution, check_cooldown
from app.engines.adrules.work.evaluate import CampaignFacts, ConditionResult, evaluate_conditions
from app.engines.adrules.work.execute import ActionScope, CampaignRef
from app.integrations.meta.errors import MetaError


def decide(
    run: AccountRun,
    task: TaskDocument,
    campaign: CampaignEntity,
    facts: CampaignFacts | None,
    error: MetaError | None,
) -> dict[str, Any] | Ready:
    """A record when the task ends here (no data, conditions not met, cooldown, an object Meta
    does not let it touch), else what the action phase needs."""
    steps: list[tuple[str, float]] = [
        ("insights_read", run.insights_seconds),
        ("custom_metrics", run.custom_seconds),
    ]
    if error is not None or facts is None:
        noun = object_noun(run.payload.rule.level)
        reason = error.describe() if error is not None else f"no data was read for the {noun}"
        return record_row(
            run,
            task,
            campaign,
            status=RECORD_ERROR,
            reason=f"Insights read failed: {reason}",
            steps=steps,
        )
    started = run.deps.clock.monotonic()
    evaluation = evaluate_conditions(task.conditions, task.group, facts)
    steps.append(("evaluate", run.deps.clock.monotonic() - started))
    last = run.last.get((task.id, campaign.id))
    now = run.deps.clock.now()
    if not evaluation.passed:
        return _unmet(run, task, campaign, evaluation.conditions, steps, last, now)
    started = run.deps.clock.monotonic()
    verdict = check_cooldown(last, task.cooldown, now)
    steps.append(("cooldown", run.deps.clock.monotonic() - started))
    if not verdict.allowed:
        return record_row(
            run,
            task,
            campaign,
            status=RECORD_SKIPPED,
            reason=verdict.reason,
            conditions=evaluation.conditions,
            steps=steps,
            next_at=verdict.next_allowed_at,
        )
    refused = not_deliverable_reason(task.action, campaign.effective_status)
    if refused is not None:
        return record_row(
            run,
            task,
            campaign,
            status=RECORD_SKIPPED,
            reason=refused,
            conditions=evaluation.conditions,
            steps=steps,
        )
    scope = action_scope(run, task, now)
    ref = CampaignRef(campaign.id, campaign.name, campaign.effective_status)
    return Ready(task, campaign, evaluation.conditions, steps, scope, ref)


def _unmet(
    run: AccountRun,
    task: TaskDocument,
    campaign: CampaignEntity,
    conditions: Sequence[ConditionResult],
    steps: list[tuple[str, float]],
    last: LastExecution | None,
    now: datetime,
) -> dict[str, Any]:
    """The record of a task whose conditions did not pass."""
    unread = [c for c in conditions if c.sheet_failed and not c.passed]
    if unread:
        # The sheet was unreachable and no usable copy existed: nothing was decided, say so.
        return record_row(
            run,
            task,
            campaign,
            status=RECORD_ERROR,
            reason="custom metric sheet unavailable: " + "; ".join(c.reason or "" for c in unread),
            conditions=conditions,
            steps=steps,
        )
    waiting = (
        last.next_permitted_at
        if last and last.next_permitted_at and last.next_permitted_at > now
        else None
    )
    return record_row(
        run,
        task,
        campaign,
        status=RECORD_NOT_EXECUTED,
        reason=why_not(conditions, task.group),
        conditions=conditions,
        steps=steps,
        next_at=waiting,
    )


def action_scope(run: AccountRun, task: TaskDocument, now: datetime) -> ActionScope:
    """What an action of ``task`` knows of the run it belongs to."""
    return ActionScope(
        rule_id=run.payload.rule.id,
        rule_name=run.payload.rule.name,
        task_id=task.id,
        task_name=task.name,
        batch_id=run.payload.batch_id,
        account_id=run.payload.account.meta_id,
        currency=run.payload.account.currency,
        timezone=evaluation_zone(run.payload),
        now=now,
        allow_private_http=run.allow_private_http,
        level=run.payload.rule.level,
    )
