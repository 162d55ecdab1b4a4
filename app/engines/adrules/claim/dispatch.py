"""The dispatcher: turn due rules into one job per active ad account (spec AR-10 to AR-13).

Each sweep claims the due rules (advancing ``next_execution_at`` in the same transaction), then for
every claimed rule and each of its *active* ad accounts fetches the campaigns its pre-filters
select, and in one transaction per rule writes a batch record per account and queues the account's
job. An account whose fetch fails is recorded as skipped and the others go on (AR-22).

This module reads and never writes to Meta: it receives a :class:`MetaReader` factory and cannot
import the write client or the action code (an import-linter contract in ``pyproject.toml``).
The job spec is handed in by the plugin for the same reason: the job's handler lives on the worker
side.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from app.db.session import ReadSession
from app.engines.adrules.catalogue import LEVEL_EDGES, LEVEL_FIELDS, SCHEDULED_STATUSES
from app.engines.adrules.claim.due_rules import ClaimedRule, claim_due_rules
from app.engines.adrules.claim.fetch import Fetched, FetchFailed, FetchProgress, fetch_campaigns
from app.engines.adrules.claim.prefilters import (
    NOT_DELIVERABLE,
    targets_not_deliverable,
    to_filtering,
)
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.documents import load_schedule, rule_document
from app.engines.adrules.models import (
    BATCH_EMPTY,
    BATCH_QUEUED,
    BATCH_SKIPPED,
    META_TOKEN_SECRET,
    AdAccount,
    Batch,
    Rule,
    RuleAccount,
    Task,
)
from app.engines.adrules.payloads import (
    RUN_ACCOUNT_JOB,
    AccountRef,
    RunAccountPayload,
    seal_token,
)
from app.engines.adrules.schemas import RuleDocument
from app.engines.adrules.stops import ENV_REASON, PLATFORM_STOP, stopped_workspaces
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.platform.crypto import SecretBox
from app.platform.models import Workspace
from app.platform.service import get_secret
from app.scheduling.sweeper import tick_key

log = logging.getLogger(__name__)

ENV_STOP_REASON = f"{PLATFORM_STOP}: {ENV_REASON}"
MISSING_CREDENTIAL = "no Meta access token is configured for this workspace"
INACTIVE_ACCOUNT = "the ad account is not active: nothing runs on it until it is activated"


@dataclass(slots=True)
class DispatchSummary:
    """What one sweep did (logged, and read by tests and the benchmark)."""

    stopped: bool = False
    rules: int = 0
    jobs: int = 0
    skipped_accounts: int = 0
    empty_accounts: int = 0
    batch_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _AccountRow:
    id: int
    meta_id: str
    currency: str
    timezone_name: str
    active: bool = True


@dataclass(frozen=True, slots=True)
class _RuleWork:
    document: RuleDocument
    accounts: list[_AccountRow]
    filtering: list[dict[str, Any]]
    token: str | None
    asked_hidden: frozenset[str] = frozenset()
    """Non-deliverable statuses the rule's pre-filters name explicitly."""


async def _load(session: ReadSession, secrets: SecretBox, claimed: ClaimedRule) -> _RuleWork | None:
    rule = await session.get(Rule, claimed.id)
    # Paused or archived between the claim and now: the person's latest word wins.
    if rule is None or rule.status not in SCHEDULED_STATUSES:
        return None
    tasks = list(
        (
            await session.execute(
                select(Task)
                .where(Task.rule_id == rule.id, Task.archived_at.is_(None))
                .order_by(Task.position, Task.id)
            )
        ).scalars()
    )
    # Inactive accounts are loaded too, only to record why nothing ran on them (spec AR-20).
    accounts = [
        _AccountRow(a.id, a.meta_id, a.currency, a.timezone_name, a.active)
        for a in (
            await session.execute(
                select(AdAccount)
                .join(RuleAccount, RuleAccount.ad_account_id == AdAccount.id)
                .where(
                    RuleAccount.rule_id == rule.id,
                    AdAccount.workspace_id == rule.workspace_id,
                )
                .order_by(AdAccount.id)
            )
        ).scalars()
    ]
    token = await get_secret(
        session, secrets, workspace_id=rule.workspace_id, name=META_TOKEN_SECRET
    )
    # The zone the rule names (its accounts' shared zone is stored as its schedule's zone);
    # "" lets each account's run use that account's own zone.
    document = rule_document(rule, tasks, load_schedule(rule.schedule).timezone or "")
    return _RuleWork(
        document,
        accounts,
        to_filtering(document.prefilters),
        token,
        targets_not_deliverable(document.prefilters),
    )


async def _fetch_account(
    deps: AdRulesDeps,
    reader: MetaReader | None,
    account: _AccountRow,
    filtering: list[dict[str, Any]],
    limit: asyncio.Semaphore,
    level: str = "campaign",
) -> Fetched | FetchFailed:
    if not account.active:
        return FetchFailed(MetaError(INACTIVE_ACCOUNT, transient=False), attempts=0, pages=0)
    if reader is None:
        return FetchFailed(MetaError(MISSING_CREDENTIAL, transient=False), attempts=0, pages=0)
    async with limit:
        progress = FetchProgress()
        try:
            async with asyncio.timeout(deps.fetch_deadline_seconds):
                return await fetch_campaigns(
                    reader,
                    account.meta_id,
                    filtering,
                    sleep=deps.sleep,
                    page_size=deps.page_size,
                    delays=deps.fetch_retry_delays,
                    progress=progress,
                    edge=LEVEL_EDGES[level],
                    fields=LEVEL_FIELDS[level],
                )
        except FetchFailed as failed:
            log.warning("ad account %s skipped: %s", account.meta_id, failed.error.describe())
            return failed
        except TimeoutError:
            error = MetaError(
                f"the campaign list did not arrive within {deps.fetch_deadline_seconds:g} s "
                f"(after {progress.pages} page(s) and {progress.attempts} request(s)); "
                "the account is skipped this run so other rules are not held up",
                transient=True,
            )
            log.warning("ad account %s skipped: %s", account.meta_id, error.describe())
            return FetchFailed(error, attempts=progress.attempts, pages=progress.pages)


async def _dispatch_rule(
    deps: AdRulesDeps,
    claimed: ClaimedRule,
    tick: datetime,
    now: datetime,
    limit: asyncio.Semaphore,
    summary: DispatchSummary,
    stopped: str | None = None,
    job_key: str = "",
) -> None:
    async with deps.db.read() as session:
        work = await _load(session, deps.secrets, claimed)
    if work is None or not work.accounts:
        return
    reader = deps.reader(work.token) if work.token else None
    results: list[Fetched | FetchFailed]
    if stopped is not None:
        # A runtime stop of the workspace or organisation: fetch nothing, record why.
        stop_error = MetaError(stopped, transient=False)
        results = [FetchFailed(stop_error, attempts=0, pages=0) for _ in work.accounts]
    else:
        results = list(
            await asyncio.gather(
                *(
                    _fetch_account(deps, reader, a, work.filtering, limit, work.document.level)
                    for a in work.accounts
                )
            )
        )
    batch_id = uuid.uuid4().hex
    sealed = seal_token(deps.secrets, work.token) if work.token else ""
    async with deps.db.write() as uow:
        session = uow.session
        for account, result in zip(work.accounts, results, strict=True):
            batch = Batch(
                batch_id=batch_id,
                workspace_id=claimed.workspace_id,
                rule_id=claimed.id,
                ad_account_id=account.id,
                account_meta_id=account.meta_id,
                entities=0,
                pages=result.pages,
                fetch_attempts=result.attempts,
                executed=0,
                not_executed=0,
                skipped=0,
                errors=0,
                shadow=work.document.shadow,
                tick_at=tick,
                created_at=now,
            )
            if isinstance(result, Fetched):
                # Archived and deleted campaigns are never acted on unless the rule asks for
                # them by name (AR-23a), whatever a provider's filter semantics let through.
                result = Fetched(
                    [
                        c
                        for c in result.campaigns
                        if c.effective_status not in NOT_DELIVERABLE
                        or c.effective_status in work.asked_hidden
                    ],
                    result.pages,
                    result.attempts,
                )
            if isinstance(result, FetchFailed):
                batch.status = BATCH_SKIPPED
                batch.error = (stopped or result.error.describe())[:2000]
                batch.finished_at = now
                summary.skipped_accounts += 1
            elif not result.campaigns:
                batch.status = BATCH_EMPTY
                batch.finished_at = now
                summary.empty_accounts += 1
            else:
                batch.status = BATCH_QUEUED
                batch.entities = len(result.campaigns)
            session.add(batch)
            await session.flush()
            if isinstance(result, Fetched) and result.campaigns:
                payload = RunAccountPayload(
                    batch_id=batch_id,
                    batch_record_id=batch.id,
                    workspace_id=claimed.workspace_id,
                    rule=work.document,
                    account=AccountRef(
                        id=account.id,
                        meta_id=account.meta_id,
                        currency=account.currency,
                        timezone_name=account.timezone_name,
                    ),
                    entities=result.campaigns,
                    access_token_encrypted=sealed,
                    dispatched_at=tick,
                )
                await deps.queue.enqueue(
                    uow,
                    deps.job,
                    payload,
                    job_id=tick_key(
                        RUN_ACCOUNT_JOB,
                        f"{claimed.id}-{account.id}{'-' + job_key if job_key else ''}",
                        tick,
                    ),
                )
                summary.jobs += 1
        await session.execute(
            update(Rule).where(Rule.id == claimed.id).values(last_batch_id=batch_id)
        )
    summary.batch_ids.append(batch_id)


async def dispatch_due(
    deps: AdRulesDeps, tick: datetime, now: Callable[[], datetime]
) -> DispatchSummary:
    """One sweep: claim every due rule (in chunks of ``claim_batch``) and dispatch each."""
    summary = DispatchSummary()
    # Checked first, every sweep: a stopped platform dispatches nothing (spec AR-23).
    if deps.stopped():
        summary.stopped = True
        return summary
    limit = asyncio.Semaphore(deps.fetch_concurrency)
    while True:
        at = now()
        claimed = await claim_due_rules(deps.db, at, deps.claim_batch)
        summary.rules += len(claimed)
        await _gather_rules(deps, claimed, tick, at, limit, summary)
        if len(claimed) < deps.claim_batch or deps.stopped():
            return summary


async def _gather_rules(
    deps: AdRulesDeps,
    claimed: list[ClaimedRule],
    tick: datetime,
    now: datetime,
    limit: asyncio.Semaphore,
    summary: DispatchSummary,
) -> None:
    async with deps.db.read() as session:
        stopped = await stopped_workspaces(session, {r.workspace_id for r in claimed})

    async def guarded(rule: ClaimedRule) -> None:
        try:
            await _dispatch_rule(
                deps, rule, tick, now, limit, summary, stopped.get(rule.workspace_id)
            )
        except Exception:
            # One rule's failure (a database error, a bug) must not stop the other rules.
            log.exception("dispatching rule %s failed", rule.id)

    await asyncio.gather(*(guarded(rule) for rule in claimed))


async def dispatch_now(
    deps: AdRulesDeps, *, workspace_id: int, rule_id: int, now: datetime
) -> DispatchSummary:
    """ "Run now": dispatch one active rule once, outside its schedule, through the same path as
    the sweep (fetch, batch records, one job per account, the stop checked) — its
    ``next_execution_at`` is left as it is. The batch id is in the summary (none when the rule
    is not active)."""
    summary = DispatchSummary()
    if deps.stopped():
        summary.stopped = True
    async with deps.db.read() as session:
        row = (
            await session.execute(
                select(Rule.id, Rule.workspace_id, Rule.next_execution_at, Workspace.timezone)
                .join(Workspace, Workspace.id == Rule.workspace_id)
                .where(Rule.id == rule_id, Rule.workspace_id == workspace_id)
            )
        ).first()
        stopped = await stopped_workspaces(session, {workspace_id})
    if row is None:
        return summary
    claimed = ClaimedRule(row[0], row[1], row[3], now, row[2])
    environment = ENV_STOP_REASON if summary.stopped else None
    summary.rules = 1
    await _dispatch_rule(
        deps,
        claimed,
        now,
        now,
        asyncio.Semaphore(deps.fetch_concurrency),
        summary,
        environment or stopped.get(workspace_id),
        # Each press is its own dispatch: a job id of its own, never deduplicated as one tick.
        job_key=f"now-{uuid.uuid4().hex[:12]}",
    )
    return summary
