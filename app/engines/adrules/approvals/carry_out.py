"""Carrying out one ad account's approved proposals (spec AR-28), as a live run's work path does:
the live values are re-read in batched GETs, each action is planned again from them (clamps
included) and compared with what was proposed — an object that changed since is skipped, saying
what changed —, the cross-rule guards are asked, the platform stop is asked immediately before
each write call, and the writes go out in batched POSTs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import AdAccount, Rule
from app.engines.adrules.notify_models import (
    PROPOSAL_EXECUTED,
    PROPOSAL_FAILED,
    PROPOSAL_SKIPPED,
    Proposal,
)
from app.engines.adrules.run_models import RECORD_ERROR, RECORD_EXECUTED, RECORD_SKIPPED
from app.engines.adrules.schemas import TaskDocument
from app.engines.adrules.work.changes import BUDGET_FIELDS, ActionFailed, Change
from app.engines.adrules.work.execute import (
    LIVE_FIELDS,
    ActionRunner,
    ActionScope,
    CampaignRef,
)
from app.engines.adrules.work.guards import budget_changes, check_budget_write, direction
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.integrations.meta.structs import GraphCampaign
from app.integrations.meta.writer import MetaWriter, Update

APPROVAL_FIELDS = (*LIVE_FIELDS, "effective_status")
"""What the re-read before an approved write asks for (status actions compare the status)."""

SECOND_CHANGE = "another approved change to this object was written first"


@dataclass(slots=True)
class Outcome:
    """How one proposal ends (``status``) and what its record says (``record_status``)."""

    status: str
    record_status: str
    reason: str | None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


def skipped(reason: str) -> Outcome:
    return Outcome(PROPOSAL_SKIPPED, RECORD_SKIPPED, reason)


def _runner(deps: AdRulesDeps, token: str) -> ActionRunner:
    return ActionRunner(
        reader=MetaReader(deps.graph, token),
        writer=MetaWriter(deps.graph, token),
        mail=None,
        http=None,
        timer=deps.clock.monotonic,
        secrets=deps.secrets,
        sleep=deps.sleep,
        retry_delays=deps.item_retry_delays,
        max_wait_seconds=deps.throttle_max_wait_seconds,
        batch_size=deps.write_batch_size,
    )


async def carry_out(
    deps: AdRulesDeps,
    workspace_id: int,
    rule: Rule,
    account: AdAccount,
    tasks: dict[int, TaskDocument],
    proposals: list[Proposal],
    token: str,
) -> list[tuple[Proposal, Outcome]]:
    """Re-read, re-plan, guard and write one ad account's approved proposals."""
    runner = _runner(deps, token)
    live = await runner.read_live(sorted({p.campaign_id for p in proposals}), APPROVAL_FIELDS)
    now = deps.clock.now()
    out: list[tuple[Proposal, Outcome]] = []
    to_write: list[tuple[Proposal, Change]] = []
    planned: set[str] = set()
    for proposal in proposals:
        task = tasks.get(proposal.task_id)
        read = live.get(proposal.campaign_id)
        if task is None:
            out.append((proposal, skipped("the task is gone")))
            continue
        if not isinstance(read, GraphCampaign):
            text = read.describe() if isinstance(read, MetaError) else "no answer"
            out.append((proposal, Outcome(PROPOSAL_FAILED, RECORD_ERROR, f"live re-read: {text}")))
            continue
        outcome_or_change = await _replan(deps, runner, rule, account, task, proposal, read, now)
        if isinstance(outcome_or_change, Outcome):
            out.append((proposal, outcome_or_change))
        elif proposal.campaign_id in planned:
            # Two tasks' changes to one object: the second waits for a later run.
            out.append((proposal, skipped(SECOND_CHANGE)))
        else:
            planned.add(proposal.campaign_id)
            to_write.append((proposal, outcome_or_change))
    if to_write:
        out += await _write(deps, runner, workspace_id, to_write)
    return out


async def _write(
    deps: AdRulesDeps,
    runner: ActionRunner,
    workspace_id: int,
    to_write: list[tuple[Proposal, Change]],
) -> list[tuple[Proposal, Outcome]]:
    """Send the re-planned changes; each proposal's outcome from its write's answer."""

    async def stop() -> str | None:
        # Asked immediately before each write call, as in a live run (AR-23).
        return await deps.stop.reason(workspace_id) if deps.stop else None

    results = await runner.write(
        [Update(p.campaign_id, change.write or {}) for p, change in to_write], before_call=stop
    )
    out: list[tuple[Proposal, Outcome]] = []
    for proposal, change in to_write:
        failed = results.get(proposal.campaign_id)
        if isinstance(failed, str):
            out.append((proposal, skipped(failed)))
        elif failed is not None:
            reason = f"the action failed: {failed.describe()}"
            out.append((proposal, Outcome(PROPOSAL_FAILED, RECORD_ERROR, reason)))
        else:
            reason = f"approved by {proposal.decided_by}"
            executed = Outcome(
                PROPOSAL_EXECUTED, RECORD_EXECUTED, reason, change.before, change.after
            )
            out.append((proposal, executed))
    return out


async def _replan(
    deps: AdRulesDeps,
    runner: ActionRunner,
    rule: Rule,
    account: AdAccount,
    task: TaskDocument,
    proposal: Proposal,
    live: GraphCampaign,
    now: datetime,
) -> Outcome | Change:
    """The change planned again from the live values, or why it is not written."""
    scope = ActionScope(
        rule_id=rule.id,
        rule_name=rule.name,
        task_id=task.id,
        task_name=task.name,
        batch_id=proposal.batch_id,
        account_id=account.meta_id,
        currency=account.currency,
        timezone=account.timezone_name or "UTC",
        now=now,
        level=rule.level,
    )
    ref = CampaignRef(
        proposal.campaign_id, live.name or proposal.campaign_name, live.effective_status
    )
    if live.effective_status in ("ARCHIVED", "DELETED"):
        return skipped(f"the object is {live.effective_status} now: it is never acted on")
    try:
        change = runner.plan(task.action, ref, scope, live)
    except ActionFailed as exc:
        return skipped(str(exc))
    if change.write is None or change.skip is not None:
        why = change.skip or change.noop or "nothing to change any more"
        return skipped(f"the object changed since it was proposed: {why}")
    if change.before != proposal.before or change.write != proposal.write:
        return Outcome(
            PROPOSAL_SKIPPED,
            RECORD_SKIPPED,
            "the object changed since it was proposed: "
            f"proposed from {proposal.before}, it is {change.before} now",
            change.before,
            change.after,
        )
    if BUDGET_FIELDS & set(change.write):
        async with deps.db.read() as session:
            seen = await budget_changes(session, account.id, proposal.campaign_id, now)
        refused = check_budget_write(
            seen,
            rule_id=rule.id,
            planned_direction=direction(change.before, change.after),
            now=now,
            max_per_hour=deps.budget_changes_per_hour,
        )
        if refused is not None:
            return skipped(refused)
    return change
