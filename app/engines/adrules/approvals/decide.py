"""Approving and rejecting a run's proposals (spec AR-28).

Approval **claims** the run's pending proposals in one ``UPDATE … WHERE status = 'pending' AND
expires_at > now RETURNING id``: two approvals at once (two people, a double click, the link and
the button) claim disjoint sets, so each change is carried out once. The claimed changes then go
through the work path of a live run: the live values are re-read in batched GETs, the action is
planned again from them (clamps included) and compared with what was proposed — an object that
changed since is skipped, saying what changed —, the cross-rule guards are asked, the platform
stop is asked immediately before each write call, and the writes go out in batched POSTs. Every
proposal and its record end ``executed``, ``skipped`` or ``error``; the audit log names who
approved or rejected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from app.db.tenancy import scoped_exists, scoped_select, scoped_update
from app.engines.adrules import records
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.documents import load_task
from app.engines.adrules.models import META_TOKEN_SECRET, AdAccount, Batch, Rule, Task
from app.engines.adrules.notify_models import (
    PROPOSAL_APPROVED,
    PROPOSAL_EXECUTED,
    PROPOSAL_FAILED,
    PROPOSAL_PENDING,
    PROPOSAL_REJECTED,
    PROPOSAL_SKIPPED,
    Proposal,
)
from app.engines.adrules.run_models import (
    RECORD_ERROR,
    RECORD_EXECUTED,
    RECORD_PROPOSED,
    RECORD_SKIPPED,
    ExecutionRecord,
)
from app.engines.adrules.schemas import TaskDocument
from app.engines.adrules.work.changes import BUDGET_FIELDS, ActionFailed, Change
from app.engines.adrules.work.cooldown import next_permitted_at
from app.engines.adrules.work.execute import (
    LIVE_FIELDS,
    ActionRunner,
    ActionScope,
    CampaignRef,
)
from app.engines.adrules.work.guards import budget_changes, check_budget_write, direction
from app.errors import Conflict, NotFound
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.integrations.meta.structs import GraphCampaign
from app.integrations.meta.writer import MetaWriter, Update
from app.platform import audit
from app.platform.audit.origin import Actor
from app.platform.service import get_secret

APPROVAL_FIELDS = (*LIVE_FIELDS, "effective_status")
"""What the re-read before an approved write asks for (status actions compare the status)."""


class ProposalsNotFound(NotFound):
    """No proposal of that run in this workspace."""


@dataclass(slots=True)
class Decision:
    """What one approval or rejection did."""

    claimed: int = 0
    executed: int = 0
    skipped: int = 0
    failed: int = 0
    rejected: int = 0
    reasons: dict[str, str] | None = None
    """Per object id, why it was skipped or failed."""


@dataclass(slots=True)
class _Outcome:
    status: str
    record_status: str
    reason: str | None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


async def _check_run(deps: AdRulesDeps, workspace_id: int, batch_id: str) -> None:
    async with deps.db.read() as session:
        found = await session.scalar(
            select(scoped_exists(Proposal, workspace_id, Proposal.batch_id == batch_id))
        )
    if not found:
        raise ProposalsNotFound("no proposal of this run in this workspace")


async def _claim(
    deps: AdRulesDeps,
    *,
    workspace_id: int,
    batch_id: str,
    proposal_ids: Sequence[int] | None,
    status: str,
    decided_by: str,
    audit_action: str,
    actor: Actor | None,
) -> list[int]:
    """Move the run's pending, unexpired proposals to ``status`` in one statement; the ids moved."""
    now = deps.clock.now()
    conditions = [
        Proposal.batch_id == batch_id,
        Proposal.status == PROPOSAL_PENDING,
        Proposal.expires_at > now,
    ]
    if proposal_ids is not None:
        conditions.append(Proposal.id.in_(list(proposal_ids)))
    async with deps.db.write() as uow:
        claimed = list(
            (
                await uow.session.scalars(
                    scoped_update(Proposal, workspace_id)
                    .where(*conditions)
                    .values(status=status, decided_by=decided_by[:200], decided_at=now)
                    .returning(Proposal.id)
                )
            ).all()
        )
        if claimed:
            rule_id = await uow.session.scalar(
                select(Proposal.rule_id).where(Proposal.id == claimed[0])
            )
            await audit.record(
                uow.session,
                action=audit_action,
                object_type="adrule",
                object_id=rule_id,
                workspace_id=workspace_id,
                after={"batch_id": batch_id, "proposals": len(claimed), "by": decided_by},
                now=now,
                actor=actor,
            )
    return sorted(claimed)


async def reject(
    deps: AdRulesDeps,
    *,
    workspace_id: int,
    batch_id: str,
    decided_by: str,
    proposal_ids: Sequence[int] | None = None,
    actor: Actor | None = None,
) -> Decision:
    """Reject the run's pending proposals: nothing is written, the records say who rejected."""
    await _check_run(deps, workspace_id, batch_id)
    claimed = await _claim(
        deps,
        workspace_id=workspace_id,
        batch_id=batch_id,
        proposal_ids=proposal_ids,
        status=PROPOSAL_REJECTED,
        decided_by=decided_by,
        audit_action="adrule.proposals_rejected",
        actor=actor,
    )
    if claimed:
        reason = f"rejected by {decided_by}"
        async with deps.db.write() as uow:
            await uow.session.execute(
                update(Proposal).where(Proposal.id.in_(claimed)).values(reason=reason)
            )
            rows = (
                await uow.session.execute(
                    select(Proposal.batch_id, Proposal.task_id, Proposal.campaign_id).where(
                        Proposal.id.in_(claimed)
                    )
                )
            ).all()
            await _settle_records(
                uow.session,
                [
                    (b, t, c, _Outcome(PROPOSAL_REJECTED, RECORD_SKIPPED, reason))
                    for b, t, c in rows
                ],
                now=deps.clock.now(),
                cooldowns={},
            )
            await recount(uow.session, batch_id)
    return Decision(claimed=len(claimed), rejected=len(claimed))


async def approve(
    deps: AdRulesDeps,
    *,
    workspace_id: int,
    batch_id: str,
    decided_by: str,
    proposal_ids: Sequence[int] | None = None,
    actor: Actor | None = None,
) -> Decision:
    """Approve the run's pending proposals and carry them out (each once)."""
    await _check_run(deps, workspace_id, batch_id)
    stopped = await deps.stop.reason(workspace_id) if deps.stop else None
    if stopped is not None:
        # Nothing is claimed: the proposals stay pending until the stop is lifted or they expire.
        raise Conflict(f"automated ad actions are stopped ({stopped}): nothing was approved")
    claimed = await _claim(
        deps,
        workspace_id=workspace_id,
        batch_id=batch_id,
        proposal_ids=proposal_ids,
        status=PROPOSAL_APPROVED,
        decided_by=decided_by,
        audit_action="adrule.proposals_approved",
        actor=actor,
    )
    decision = Decision(claimed=len(claimed), reasons={})
    if not claimed:
        return decision
    async with deps.db.read() as session:
        proposals = list(
            (await session.scalars(select(Proposal).where(Proposal.id.in_(claimed)))).all()
        )
        rule = await session.get(Rule, proposals[0].rule_id)
        tasks = {
            t.id: load_task(t)
            for t in (
                await session.scalars(
                    select(Task).where(Task.id.in_({p.task_id for p in proposals}))
                )
            ).all()
        }
        accounts = {
            a.id: a
            for a in (
                await session.scalars(
                    scoped_select(AdAccount, workspace_id).where(
                        AdAccount.id.in_({p.ad_account_id for p in proposals})
                    )
                )
            ).all()
        }
        token = await get_secret(
            session, deps.secrets, workspace_id=workspace_id, name=META_TOKEN_SECRET
        )
    settled: list[tuple[Proposal, _Outcome]] = []
    for account_id in sorted({p.ad_account_id for p in proposals}):
        mine = [p for p in proposals if p.ad_account_id == account_id]
        account = accounts.get(account_id)
        if account is None or not account.active or token is None or rule is None:
            why = "the ad account is not active" if token else "no Meta access token is stored"
            settled += [(p, _Outcome(PROPOSAL_SKIPPED, RECORD_SKIPPED, why)) for p in mine]
            continue
        settled += await _carry_out(deps, workspace_id, rule, account, tasks, mine, token)
    now = deps.clock.now()
    cooldowns = {t.id: t.cooldown for t in tasks.values()}
    async with deps.db.write() as uow:
        for proposal, outcome in settled:
            await uow.session.execute(
                update(Proposal)
                .where(Proposal.id == proposal.id, Proposal.status == PROPOSAL_APPROVED)
                .values(status=outcome.status, reason=outcome.reason)
            )
        await _settle_records(
            uow.session,
            [(p.batch_id, p.task_id, p.campaign_id, o) for p, o in settled],
            now=now,
            cooldowns=cooldowns,
        )
        await recount(uow.session, batch_id)
    for proposal, outcome in settled:
        if outcome.status == PROPOSAL_EXECUTED:
            decision.executed += 1
        elif outcome.status == PROPOSAL_FAILED:
            decision.failed += 1
        else:
            decision.skipped += 1
        if outcome.status != PROPOSAL_EXECUTED and outcome.reason and decision.reasons is not None:
            decision.reasons[proposal.campaign_id] = outcome.reason
    return decision


async def _carry_out(
    deps: AdRulesDeps,
    workspace_id: int,
    rule: Rule,
    account: AdAccount,
    tasks: dict[int, TaskDocument],
    proposals: list[Proposal],
    token: str,
) -> list[tuple[Proposal, _Outcome]]:
    """Re-read, re-plan, guard and write one ad account's approved proposals."""
    runner = ActionRunner(
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
    live = await runner.read_live(sorted({p.campaign_id for p in proposals}), APPROVAL_FIELDS)
    now = deps.clock.now()
    out: list[tuple[Proposal, _Outcome]] = []
    to_write: list[tuple[Proposal, Change]] = []
    planned: set[str] = set()
    for proposal in proposals:
        task = tasks.get(proposal.task_id)
        read = live.get(proposal.campaign_id)
        if task is None:
            out.append((proposal, _Outcome(PROPOSAL_SKIPPED, RECORD_SKIPPED, "the task is gone")))
            continue
        if not isinstance(read, GraphCampaign):
            text = read.describe() if isinstance(read, MetaError) else "no answer"
            out.append((proposal, _Outcome(PROPOSAL_FAILED, RECORD_ERROR, f"live re-read: {text}")))
            continue
        outcome_or_change = await _replan(deps, runner, rule, account, task, proposal, read, now)
        if isinstance(outcome_or_change, _Outcome):
            out.append((proposal, outcome_or_change))
        elif proposal.campaign_id in planned:
            # Two tasks' changes to one object: the second waits for a later run.
            out.append(
                (
                    proposal,
                    _Outcome(
                        PROPOSAL_SKIPPED,
                        RECORD_SKIPPED,
                        "another approved change to this object was written first",
                    ),
                )
            )
        else:
            planned.add(proposal.campaign_id)
            to_write.append((proposal, outcome_or_change))
    if not to_write:
        return out

    async def stop() -> str | None:
        # Asked immediately before each write call, as in a live run (AR-23).
        return await deps.stop.reason(workspace_id) if deps.stop else None

    results = await runner.write(
        [Update(p.campaign_id, change.write or {}) for p, change in to_write], before_call=stop
    )
    for proposal, change in to_write:
        failed = results.get(proposal.campaign_id)
        if isinstance(failed, str):
            out.append((proposal, _Outcome(PROPOSAL_SKIPPED, RECORD_SKIPPED, failed)))
        elif failed is not None:
            out.append(
                (
                    proposal,
                    _Outcome(
                        PROPOSAL_FAILED,
                        RECORD_ERROR,
                        f"the action failed: {failed.describe()}",
                    ),
                )
            )
        else:
            out.append(
                (
                    proposal,
                    _Outcome(
                        PROPOSAL_EXECUTED,
                        RECORD_EXECUTED,
                        f"approved by {proposal.decided_by}",
                        change.before,
                        change.after,
                    ),
                )
            )
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
) -> _Outcome | Change:
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
        return _Outcome(
            PROPOSAL_SKIPPED,
            RECORD_SKIPPED,
            f"the object is {live.effective_status} now: it is never acted on",
        )
    try:
        change = runner.plan(task.action, ref, scope, live)
    except ActionFailed as exc:
        return _Outcome(PROPOSAL_SKIPPED, RECORD_SKIPPED, str(exc))
    if change.write is None or change.skip is not None:
        why = change.skip or change.noop or "nothing to change any more"
        return _Outcome(
            PROPOSAL_SKIPPED, RECORD_SKIPPED, f"the object changed since it was proposed: {why}"
        )
    if change.before != proposal.before or change.write != proposal.write:
        return _Outcome(
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
            return _Outcome(PROPOSAL_SKIPPED, RECORD_SKIPPED, refused)
    return change


async def _settle_records(
    session: Any,
    settled: Sequence[tuple[str, int, str, _Outcome]],
    *,
    now: datetime,
    cooldowns: dict[int, Any],
) -> None:
    """The ``proposed`` records take the decision's outcome; an executed one is dated now and
    starts its task's cooldown."""
    for batch_id, task_id, campaign_id, outcome in settled:
        values: dict[str, Any] = {"status": outcome.record_status, "reason": outcome.reason}
        if outcome.record_status == RECORD_EXECUTED:
            values.update(
                before=outcome.before,
                after=outcome.after,
                created_at=now,
                next_permitted_at=next_permitted_at(now, cooldowns[task_id]),
            )
        await session.execute(
            update(ExecutionRecord)
            .where(
                ExecutionRecord.batch_id == batch_id,
                ExecutionRecord.task_id == task_id,
                ExecutionRecord.campaign_id == campaign_id,
                ExecutionRecord.status == RECORD_PROPOSED,
            )
            .values(**values)
        )


async def recount(session: Any, batch_id: str) -> None:
    """The run's batch records count the decided proposals."""
    batches = (
        await session.execute(
            select(Batch.id, Batch.ad_account_id).where(Batch.batch_id == batch_id)
        )
    ).all()
    for record_id, account_id in batches:
        counts = await records.batch_counts(session, batch_id, account_id)
        await session.execute(
            update(Batch)
            .where(Batch.id == record_id)
            .values(
                executed=counts.executed,
                not_executed=counts.not_executed,
                skipped=counts.skipped,
                errors=counts.errors,
            )
        )
