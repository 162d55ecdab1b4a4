"""A dispatch's batch records and account jobs (spec AR-13, AR-18, AR-22).

One transaction per rule writes a batch record per ad account — ``queued`` (with the account's job
on the queue, in the same transaction), ``empty``, ``skipped`` with the reason, or ``deferred``
when the tick's budget ran out first — and a later tick settles a deferred record in place: the
same record (and batch id) moves on once the account's campaigns arrive. The deferred record is
only settled while it is still deferred, in the transaction that queues its job, so two processes
never queue it twice.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update

from app.db.session import UnitOfWork
from app.engines.adrules.batch_states import BATCHES
from app.engines.adrules.claim.fetch import FetchFailed
from app.engines.adrules.claim.pool import Deferred, FetchResult
from app.engines.adrules.claim.prefilters import NOT_DELIVERABLE
from app.engines.adrules.claim.rulework import AccountRow, DispatchSummary, RuleWork
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import (
    BATCH_DEFERRED,
    BATCH_EMPTY,
    BATCH_QUEUED,
    BATCH_SKIPPED,
    Batch,
    Rule,
)
from app.engines.adrules.payloads import (
    RUN_ACCOUNT_JOB,
    AccountRef,
    CampaignEntity,
    RunAccountPayload,
    seal_token,
)
from app.scheduling.sweeper import tick_key

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RuleRef:
    """The rule a batch belongs to, and how its jobs are keyed."""

    id: int
    workspace_id: int
    job_key: str = ""
    """Appended to the job id ("run now": each press its own job)."""


def _outcome(result: FetchResult, work: RuleWork) -> tuple[str, list[CampaignEntity]]:
    """The batch record's status after the account's fetch, and the campaigns to queue (none:
    no job)."""
    if isinstance(result, Deferred):
        return BATCH_DEFERRED, []
    if isinstance(result, FetchFailed):
        return BATCH_SKIPPED, []
    # Archived and deleted campaigns are never acted on unless the rule asks for them by name
    # (AR-23a), whatever a provider's filter semantics let through.
    campaigns = [
        c
        for c in result.campaigns
        if c.effective_status not in NOT_DELIVERABLE or c.effective_status in work.asked_hidden
    ]
    return (BATCH_QUEUED, campaigns) if campaigns else (BATCH_EMPTY, [])


def _settle(
    batch: Batch,
    result: FetchResult,
    campaigns: list[CampaignEntity],
    stopped: str | None,
    now: datetime,
    summary: DispatchSummary,
) -> None:
    """Fill the rest of ``batch`` from the account's fetch, for the status it was given."""
    batch.pages = result.pages
    batch.fetch_attempts = result.attempts
    if isinstance(result, Deferred):
        batch.error = result.reason[:2000]
        batch.fetch_waited_ms = round(result.waited * 1000)
        summary.deferred_accounts += 1
        return
    if isinstance(result, FetchFailed):
        if stopped is None:
            log.warning("ad account %s skipped: %s", batch.account_meta_id, result.error.describe())
        batch.error = (stopped or result.error.describe())[:2000]
        batch.finished_at = now
        summary.skipped_accounts += 1
        return
    batch.error = None
    if not campaigns:
        batch.finished_at = now
        summary.empty_accounts += 1
        return
    batch.entities = len(campaigns)


async def _enqueue(
    deps: AdRulesDeps,
    uow: UnitOfWork,
    rule: RuleRef,
    work: RuleWork,
    batch: Batch,
    account: AccountRow,
    campaigns: list[CampaignEntity],
    sealed: str,
) -> None:
    payload = RunAccountPayload(
        batch_id=batch.batch_id,
        batch_record_id=batch.id,
        workspace_id=rule.workspace_id,
        rule=work.document,
        account=AccountRef(
            id=account.id,
            meta_id=account.meta_id,
            currency=account.currency,
            timezone_name=account.timezone_name,
        ),
        entities=campaigns,
        access_token_encrypted=sealed,
        dispatched_at=batch.tick_at,
    )
    suffix = f"-{rule.job_key}" if rule.job_key else ""
    # Keyed by the tick that dispatched the rule: a deferred account's job, queued a tick later,
    # has the id it would have had, so a re-run of either tick queues nothing new.
    await deps.queue.enqueue(
        uow,
        deps.job,
        payload,
        job_id=tick_key(RUN_ACCOUNT_JOB, f"{rule.id}-{account.id}{suffix}", batch.tick_at),
    )


async def record_dispatch(
    deps: AdRulesDeps,
    rule: RuleRef,
    work: RuleWork,
    results: list[FetchResult],
    *,
    tick: datetime,
    now: datetime,
    summary: DispatchSummary,
    stopped: str | None,
) -> None:
    """One new batch: a record per account, a job per account with campaigns."""
    batch_id = uuid.uuid4().hex
    sealed = seal_token(deps.secrets, work.token) if work.token else ""
    async with deps.db.write() as uow:
        session = uow.session
        written: list[tuple[Batch, AccountRow, list[CampaignEntity]]] = []
        for account, result in zip(work.accounts, results, strict=True):
            status, campaigns = _outcome(result, work)
            batch = Batch(
                **BATCHES.create(status),
                batch_id=batch_id,
                workspace_id=rule.workspace_id,
                rule_id=rule.id,
                ad_account_id=account.id,
                account_meta_id=account.meta_id,
                entities=0,
                fetch_waited_ms=0,
                executed=0,
                not_executed=0,
                skipped=0,
                errors=0,
                shadow=work.document.shadow,
                # The zone the account's run evaluates in, shown before the run starts (AR-44).
                timezone=work.document.timezone or account.timezone_name or "UTC",
                tick_at=tick,
                created_at=now,
            )
            _settle(batch, result, campaigns, stopped, now, summary)
            session.add(batch)
            written.append((batch, account, campaigns))
        # One flush for the rule's records (their ids go into the jobs): the records of many
        # rules are written together when a tick's budget runs out.
        await session.flush()
        for batch, account, campaigns in written:
            if campaigns:
                await _enqueue(deps, uow, rule, work, batch, account, campaigns, sealed)
                summary.jobs += 1
        await session.execute(update(Rule).where(Rule.id == rule.id).values(last_batch_id=batch_id))
    summary.batch_ids.append(batch_id)


async def record_resumed(
    deps: AdRulesDeps,
    rule: RuleRef,
    work: RuleWork,
    settled: list[tuple[int, AccountRow, FetchResult]],
    *,
    now: datetime,
    summary: DispatchSummary,
    stopped: str | None,
) -> None:
    """Settle deferred records ``(record id, account, result)`` in place; a record no longer
    deferred (settled by another process meanwhile) is left as it is."""
    sealed = seal_token(deps.secrets, work.token) if work.token else ""
    async with deps.db.write() as uow:
        session = uow.session
        still = {
            b.id: b
            for b in (
                await session.execute(
                    select(Batch)
                    .where(
                        Batch.id.in_([r for r, _, _ in settled]),
                        BATCHES.keyed(BATCH_DEFERRED),
                    )
                    .with_for_update()
                )
            ).scalars()
        }
        queued: list[tuple[Batch, AccountRow, list[CampaignEntity]]] = []
        for record_id, account, result in settled:
            batch = still.get(record_id)
            if batch is not None:
                status, campaigns = _outcome(result, work)
                BATCHES.move(batch, status)
                _settle(batch, result, campaigns, stopped, now, summary)
                queued.append((batch, account, campaigns))
        await session.flush()
        for batch, account, campaigns in queued:
            if campaigns:
                await _enqueue(deps, uow, rule, work, batch, account, campaigns, sealed)
                summary.jobs += 1


async def abandon_deferred(
    deps: AdRulesDeps, record_ids: list[int], reason: str, now: datetime
) -> None:
    """Deferred records that will not be fetched (the rule was paused, or no longer covers the
    account): recorded as skipped, saying why."""
    if not record_ids:
        return
    async with deps.db.write() as uow:
        await uow.session.execute(
            BATCHES.transition(
                update(Batch).where(Batch.id.in_(record_ids)),
                BATCH_SKIPPED,
                from_=(BATCH_DEFERRED,),
            ).values(error=reason, finished_at=now)
        )
