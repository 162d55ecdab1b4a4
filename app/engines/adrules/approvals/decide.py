"""Approving and rejecting a run's proposals (spec AR-28).

Approval **claims** the run's pending proposals in one ``UPDATE … WHERE status = 'pending' AND
expires_at > now RETURNING id``: two approvals at once (two people, a double click, the link and
the button) claim disjoint sets, so each change is carried out once. The claimed changes then go
through the work path of a live run (:mod:`.carry_out`). Every proposal and its record end
``executed``, ``skipped`` or ``error``; the audit log names who approved or rejected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from app.db.tenancy import scoped_exists, scoped_select, scoped_update
from app.engines.adrules import records
from app.engines.adrules.approvals.carry_out import Outcome, carry_out, skipped
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.documents import load_task
from app.engines.adrules.models import META_TOKEN_SECRET, AdAccount, Batch, Rule, Task
from app.engines.adrules.notify_models import (
    PROPOSAL_APPROVED,
    PROPOSAL_EXECUTED,
    PROPOSAL_FAILED,
    PROPOSAL_PENDING,
    PROPOSAL_REJECTED,
    Proposal,
)
from app.engines.adrules.proposal_states import PROPOSALS
from app.engines.adrules.record_states import RECORDS
from app.engines.adrules.run_models import (
    RECORD_EXECUTED,
    RECORD_PROPOSED,
    RECORD_SKIPPED,
    ExecutionRecord,
)
from app.engines.adrules.schemas import TaskDocument
from app.engines.adrules.work.cooldown import next_permitted_at
from app.errors import Conflict, NotFound
from app.platform import audit
from app.platform.audit.origin import Actor
from app.platform.service import get_secret


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
    conditions = [Proposal.batch_id == batch_id, Proposal.expires_at > now]
    if proposal_ids is not None:
        conditions.append(Proposal.id.in_(list(proposal_ids)))
    async with deps.db.write() as uow:
        claimed = list(
            (
                await uow.session.scalars(
                    PROPOSALS.transition(
                        scoped_update(Proposal, workspace_id).where(*conditions),
                        status,
                        from_=(PROPOSAL_PENDING,),
                    )
                    .values(decided_by=decided_by[:200], decided_at=now)
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
                [(b, t, c, Outcome(PROPOSAL_REJECTED, RECORD_SKIPPED, reason)) for b, t, c in rows],
                now=deps.clock.now(),
                cooldowns={},
            )
            await recount(uow.session, batch_id)
    return Decision(claimed=len(claimed), rejected=len(claimed))


@dataclass(frozen=True, slots=True)
class _Claimed:
    """What carrying out the claimed proposals needs, read in one session."""

    proposals: list[Proposal]
    rule: Rule | None
    tasks: dict[int, TaskDocument]
    accounts: dict[int, AdAccount]
    token: str | None


async def _load(deps: AdRulesDeps, workspace_id: int, claimed: list[int]) -> _Claimed:
    async with deps.db.read() as session:
        proposals = list(
            (await session.scalars(select(Proposal).where(Proposal.id.in_(claimed)))).all()
        )
        rule = await session.get(Rule, proposals[0].rule_id)
        task_ids = {p.task_id for p in proposals}
        tasks = {
            t.id: load_task(t)
            for t in (await session.scalars(select(Task).where(Task.id.in_(task_ids)))).all()
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
    return _Claimed(proposals, rule, tasks, accounts, token)


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
    loaded = await _load(deps, workspace_id, claimed)
    settled: list[tuple[Proposal, Outcome]] = []
    for account_id in sorted({p.ad_account_id for p in loaded.proposals}):
        mine = [p for p in loaded.proposals if p.ad_account_id == account_id]
        account = loaded.accounts.get(account_id)
        rule, token = loaded.rule, loaded.token
        if account is None or not account.active or token is None or rule is None:
            why = "the ad account is not active" if token else "no Meta access token is stored"
            settled += [(p, skipped(why)) for p in mine]
            continue
        settled += await carry_out(deps, workspace_id, rule, account, loaded.tasks, mine, token)
    await _write_back(deps, batch_id, settled, loaded.tasks)
    _tally(decision, settled)
    return decision


async def _write_back(
    deps: AdRulesDeps,
    batch_id: str,
    settled: list[tuple[Proposal, Outcome]],
    tasks: dict[int, TaskDocument],
) -> None:
    """The approved proposals and their records take their outcomes; the run is recounted."""
    now = deps.clock.now()
    cooldowns = {t.id: t.cooldown for t in tasks.values()}
    async with deps.db.write() as uow:
        for proposal, outcome in settled:
            await uow.session.execute(
                PROPOSALS.transition(
                    update(Proposal).where(Proposal.id == proposal.id),
                    outcome.status,
                    from_=(PROPOSAL_APPROVED,),
                ).values(reason=outcome.reason)
            )
        await _settle_records(
            uow.session,
            [(p.batch_id, p.task_id, p.campaign_id, o) for p, o in settled],
            now=now,
            cooldowns=cooldowns,
        )
        await recount(uow.session, batch_id)


def _tally(decision: Decision, settled: list[tuple[Proposal, Outcome]]) -> None:
    for proposal, outcome in settled:
        if outcome.status == PROPOSAL_EXECUTED:
            decision.executed += 1
        elif outcome.status == PROPOSAL_FAILED:
            decision.failed += 1
        else:
            decision.skipped += 1
        if outcome.status != PROPOSAL_EXECUTED and outcome.reason and decision.reasons is not None:
            decision.reasons[proposal.campaign_id] = outcome.reason


async def _settle_records(
    session: Any,
    settled: Sequence[tuple[str, int, str, Outcome]],
    *,
    now: datetime,
    cooldowns: dict[int, Any],
) -> None:
    """The ``proposed`` records take the decision's outcome; an executed one is dated now and
    starts its task's cooldown."""
    for batch_id, task_id, campaign_id, outcome in settled:
        values: dict[str, Any] = {"reason": outcome.reason}
        if outcome.record_status == RECORD_EXECUTED:
            values.update(
                before=outcome.before,
                after=outcome.after,
                created_at=now,
                next_permitted_at=next_permitted_at(now, cooldowns[task_id]),
            )
        await session.execute(
            RECORDS.transition(
                update(ExecutionRecord).where(
                    ExecutionRecord.batch_id == batch_id,
                    ExecutionRecord.task_id == task_id,
                    ExecutionRecord.campaign_id == campaign_id,
                ),
                outcome.record_status,
                from_=(RECORD_PROPOSED,),
            ).values(**values)
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
