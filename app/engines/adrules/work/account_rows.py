"""The execution records an account job writes: one row per task and campaign, with the
conditions it saw, the steps it took and their timings (spec AR-16, AR-41, AR-44)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.engines.adrules.catalogue import UNIFIED_ATTRIBUTION
from app.engines.adrules.payloads import CampaignEntity, RunAccountPayload, evaluation_zone
from app.engines.adrules.record_states import RECORDS
from app.engines.adrules.run_models import (
    RECORD_ERROR,
    RECORD_EXECUTED,
    RECORD_SKIPPED,
    RECORD_WOULD_EXECUTE,
)
from app.engines.adrules.schemas import RuleDocument, TaskDocument
from app.engines.adrules.work.account_state import AccountRun, Ready
from app.engines.adrules.work.changes import action_parameters
from app.engines.adrules.work.cooldown import LastExecution, next_permitted_at
from app.engines.adrules.work.evaluate import ConditionResult


def attribution_label(rule: RuleDocument) -> str:
    """What a record says of the attribution its Insights were read with (spec AR-41)."""
    return ",".join(rule.attribution_windows or ()) or UNIFIED_ATTRIBUTION


def done_row(
    run: AccountRun,
    task: TaskDocument,
    item: Ready,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> dict[str, Any]:
    """The record of an action carried out (or, for a shadow rule, one it would have carried
    out); its cooldown starts now."""
    shadow = run.payload.rule.shadow
    executed_at = run.deps.clock.now()
    nxt = next_permitted_at(executed_at, task.cooldown)
    run.last[(task.id, item.campaign.id)] = LastExecution(executed_at, nxt)
    row = item_row(
        run,
        task,
        item,
        status=RECORD_WOULD_EXECUTE if shadow else RECORD_EXECUTED,
        reason="shadow: nothing was written or sent" if shadow else None,
        before=before,
        after=after,
        next_at=nxt,
    )
    row["_changed"] = not shadow
    return row


def failed_row(
    run: AccountRun, task: TaskDocument, item: Ready, text: str, *, changed: bool = False
) -> dict[str, Any]:
    """An ``error`` record of the action; ``changed`` when it may have reached the outside
    world (committed at once)."""
    row = item_row(run, task, item, status=RECORD_ERROR, reason=f"the action failed: {text}")
    row["_changed"] = changed
    return row


def item_row(
    run: AccountRun,
    task: TaskDocument,
    item: Ready,
    *,
    status: str,
    reason: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    next_at: datetime | None = None,
) -> dict[str, Any]:
    return record_row(
        run,
        task,
        item.campaign,
        status=status,
        reason=reason,
        conditions=item.conditions,
        steps=item.steps,
        before=before,
        after=after,
        next_at=next_at,
    )


def why_not(conditions: Sequence[ConditionResult], group: str) -> str:
    failed = [c for c in conditions if not c.passed]
    parts = [
        f"{c.text} (saw {c.seen if c.seen is not None else 'no value'}"
        + (f": {c.reason})" if c.reason else ")")
        for c in failed
    ]
    joiner = "none of the conditions passed: " if group == "or" else "conditions not met: "
    return joiner + "; ".join(parts)


def skipped_row(
    payload: RunAccountPayload,
    task: TaskDocument,
    campaign: CampaignEntity,
    *,
    reason: str,
    now: datetime,
) -> dict[str, Any]:
    """A ``skipped`` record made before anything was read (the platform stop)."""
    return _record(payload, task, campaign, status=RECORD_SKIPPED, reason=reason, created_at=now)


def record_row(
    run: AccountRun,
    task: TaskDocument,
    campaign: CampaignEntity,
    *,
    status: str,
    steps: list[tuple[str, float]],
    reason: str | None = None,
    conditions: Sequence[ConditionResult] = (),
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    next_at: datetime | None = None,
) -> dict[str, Any]:
    return _record(
        run.payload,
        task,
        campaign,
        status=status,
        reason=reason,
        created_at=run.deps.clock.now(),
        steps=steps,
        conditions=conditions,
        before=before,
        after=after,
        next_at=next_at,
    )


def _record(
    payload: RunAccountPayload,
    task: TaskDocument,
    campaign: CampaignEntity,
    *,
    status: str,
    reason: str | None,
    created_at: datetime,
    steps: Sequence[tuple[str, float]] = (),
    conditions: Sequence[ConditionResult] = (),
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    next_at: datetime | None = None,
) -> dict[str, Any]:
    """One execution record's row (its timeline and conditions as the log page reads them)."""
    return {
        "workspace_id": payload.workspace_id,
        "rule_id": payload.rule.id,
        "task_id": task.id,
        "ad_account_id": payload.account.id,
        "batch_id": payload.batch_id,
        "campaign_id": campaign.id,
        "campaign_name": campaign.name[:400],
        "action": type(task.action).__struct_config__.tag or "",
        **RECORDS.create(status),
        "reason": reason,
        "parameters": action_parameters(task.action),
        "before": before,
        "after": after,
        "conditions": [_condition_json(c) for c in conditions],
        "steps": [{"step": name, "seconds": round(seconds, 6)} for name, seconds in steps],
        "elapsed_seconds": round(float(sum(s for _, s in steps)), 6),
        "next_permitted_at": next_at,
        "created_at": created_at,
        "timezone": evaluation_zone(payload),
        "attribution": attribution_label(payload.rule),
    }


def _condition_json(result: ConditionResult) -> dict[str, Any]:
    return {
        "index": result.index,
        "kind": result.kind,
        "text": result.text,
        "seen": result.seen,
        "compared": result.compared,
        "passed": result.passed,
        "reason": result.reason,
        "source": result.source,
        "source_age_seconds": result.source_age_seconds,
        "source_note": result.source_note,
        "sheet_failed": result.sheet_failed,
    }
