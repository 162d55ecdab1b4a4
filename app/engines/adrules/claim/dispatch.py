"""The dispatcher: turn due rules into one job per active ad account (spec AR-10 to AR-13).

Each sweep first takes the accounts earlier ticks deferred, then claims the due rules (advancing
``next_execution_at`` in the same transaction); for every rule and each of its *active* ad accounts
it fetches the campaigns its pre-filters select through the tick's :class:`FetchPool` (each
account's own deadline from its first call, slots given back by calls that hang, the tick's
budget), and in one transaction per rule writes a batch record per account and queues the
account's job (:mod:`.batches`). An account whose fetch fails is recorded as skipped and the others
go on (AR-22); one the budget did not reach is recorded as deferred and taken first next tick.

This module reads and never writes to Meta: it receives a :class:`MetaReader` factory and cannot
import the write client or the action code (an import-linter contract in ``pyproject.toml``).
The job spec is handed in by the plugin for the same reason: the job's handler lives on the worker
side.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime

from app.db.tenancy import scoped_select
from app.engines.adrules.catalogue import LEVEL_EDGES, LEVEL_FIELDS
from app.engines.adrules.claim.batches import (
    RuleRef,
    abandon_deferred,
    record_dispatch,
    record_resumed,
)
from app.engines.adrules.claim.deferred import DeferredBatch, deferred_batches
from app.engines.adrules.claim.due_rules import ClaimedRule, claim_due_rules
from app.engines.adrules.claim.fetch import Fetched, FetchFailed, FetchProgress, fetch_campaigns
from app.engines.adrules.claim.pool import FetchPool, FetchResult
from app.engines.adrules.claim.rulework import (
    AccountRow,
    DispatchSummary,
    RuleWork,
    load_rule_work,
)
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import Rule
from app.engines.adrules.stops import ENV_REASON, PLATFORM_STOP, stopped_workspaces
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.platform.models import Workspace

__all__ = ["DispatchSummary", "dispatch_due", "dispatch_now"]

log = logging.getLogger(__name__)

ENV_STOP_REASON = f"{PLATFORM_STOP}: {ENV_REASON}"
MISSING_CREDENTIAL = "no Meta access token is configured for this workspace"
INACTIVE_ACCOUNT = "the ad account is not active: nothing runs on it until it is activated"
RULE_GONE = "the rule was paused or archived before its deferred fetch"
ACCOUNT_GONE = "the rule no longer covers this ad account"


def _pool(deps: AdRulesDeps, budget: float | None) -> FetchPool:
    return FetchPool(
        clock=deps.clock,
        slots=deps.fetch_concurrency,
        deadline=deps.fetch_deadline_seconds,
        slot_seconds=deps.fetch_slot_seconds,
        budget=budget,
        outstanding=deps.fetch_outstanding,
    )


def _done(result: FetchResult) -> asyncio.Future[FetchResult]:
    future: asyncio.Future[FetchResult] = asyncio.get_running_loop().create_future()
    future.set_result(result)
    return future


def _fetches(
    deps: AdRulesDeps,
    pool: FetchPool,
    work: RuleWork,
    accounts: list[AccountRow],
    stopped: str | None,
    waited: list[float] | None = None,
) -> list[asyncio.Future[FetchResult]]:
    """Each account's result to come: submitted to the pool, or known at once. ``waited``: per
    account, the seconds of its deadline earlier ticks used."""
    reader = deps.reader(work.token) if work.token else None
    out: list[asyncio.Future[FetchResult]] = []
    for n, account in enumerate(accounts):
        if stopped is not None:
            # A runtime stop of the workspace or organisation: fetch nothing, record why.
            out.append(_done(FetchFailed(MetaError(stopped, transient=False), 0, 0)))
        elif not account.active:
            out.append(_done(FetchFailed(MetaError(INACTIVE_ACCOUNT, transient=False), 0, 0)))
        elif reader is None:
            out.append(_done(FetchFailed(MetaError(MISSING_CREDENTIAL, transient=False), 0, 0)))
        else:
            used = waited[n] if waited else 0.0
            fetch = _fetcher(deps, reader, account, work)
            out.append(pool.submit(account.meta_id, fetch, waited=used))
    return out


def _fetcher(
    deps: AdRulesDeps, reader: MetaReader, account: AccountRow, work: RuleWork
) -> Callable[[FetchProgress], Awaitable[Fetched]]:
    level = work.document.level

    async def fetch(progress: FetchProgress) -> Fetched:
        return await fetch_campaigns(
            reader,
            account.meta_id,
            work.filtering,
            sleep=deps.sleep,
            page_size=deps.page_size,
            delays=deps.fetch_retry_delays,
            progress=progress,
            edge=LEVEL_EDGES[level],
            fields=LEVEL_FIELDS[level],
        )

    return fetch


async def _finish_rule(
    deps: AdRulesDeps,
    rule: RuleRef,
    work: RuleWork,
    fetches: list[asyncio.Future[FetchResult]],
    tick: datetime,
    now: datetime,
    summary: DispatchSummary,
    stopped: str | None,
) -> None:
    try:
        results = list(await asyncio.gather(*fetches))
        await record_dispatch(
            deps, rule, work, results, tick=tick, now=now, summary=summary, stopped=stopped
        )
    except Exception:
        # One rule's failure (a database error, a bug) must not stop the other rules.
        log.exception("dispatching rule %s failed", rule.id)


async def _load(deps: AdRulesDeps, rule_id: int) -> RuleWork | None:
    async with deps.db.read() as session:
        return await load_rule_work(session, deps.secrets, rule_id)


async def _admit_rules(
    deps: AdRulesDeps,
    pool: FetchPool,
    claimed: list[ClaimedRule],
    tick: datetime,
    now: datetime,
    summary: DispatchSummary,
) -> list[asyncio.Task[None]]:
    """Load the claimed rules, submit their accounts, and start each rule's recording."""
    async with deps.db.read() as session:
        stopped = await stopped_workspaces(session, {r.workspace_id for r in claimed})

    async def load(rule: ClaimedRule) -> RuleWork | None:
        try:
            return await _load(deps, rule.id)
        except Exception:
            log.exception("dispatching rule %s failed", rule.id)
            return None

    works = await asyncio.gather(*(load(rule) for rule in claimed))
    tasks: list[asyncio.Task[None]] = []
    for rule, work in zip(claimed, works, strict=True):
        if work is None or not work.accounts:
            continue
        reason = stopped.get(rule.workspace_id)
        fetches = _fetches(deps, pool, work, work.accounts, reason)
        ref = RuleRef(rule.id, rule.workspace_id)
        tasks.append(
            asyncio.create_task(_finish_rule(deps, ref, work, fetches, tick, now, summary, reason))
        )
    return tasks


async def _finish_resumed(
    deps: AdRulesDeps,
    group: DeferredBatch,
    work: RuleWork,
    records: list[tuple[int, AccountRow]],
    fetches: list[asyncio.Future[FetchResult]],
    now: datetime,
    summary: DispatchSummary,
    stopped: str | None,
) -> None:
    try:
        results = await asyncio.gather(*fetches)
        settled = [(r, a, res) for (r, a), res in zip(records, results, strict=True)]
        ref = RuleRef(group.rule_id, group.workspace_id)
        await record_resumed(deps, ref, work, settled, now=now, summary=summary, stopped=stopped)
    except Exception:
        log.exception("dispatching the deferred accounts of rule %s failed", group.rule_id)


async def _resume_deferred(
    deps: AdRulesDeps, pool: FetchPool, now: datetime, summary: DispatchSummary
) -> list[asyncio.Task[None]]:
    """Submit the accounts earlier ticks deferred, before any newly due rule's."""
    groups = await deferred_batches(deps.db, deps.claim_batch)
    if not groups:
        return []
    async with deps.db.read() as session:
        stopped = await stopped_workspaces(session, {g.workspace_id for g in groups})
    tasks: list[asyncio.Task[None]] = []
    for group in groups:
        work = await _load(deps, group.rule_id)
        if work is None:
            await abandon_deferred(deps, [r for r, _ in group.records], RULE_GONE, now)
            continue
        by_id = {a.id: a for a in work.accounts}
        records = [(r, by_id[a]) for r, a in group.records if a in by_id]
        gone = [r for r, a in group.records if a not in by_id]
        await abandon_deferred(deps, gone, ACCOUNT_GONE, now)
        if not records:
            continue
        summary.resumed_accounts += len(records)
        reason = stopped.get(group.workspace_id)
        used = [group.waited[r] for r, _ in records]
        fetches = _fetches(deps, pool, work, [a for _, a in records], reason, used)
        tasks.append(
            asyncio.create_task(
                _finish_resumed(deps, group, work, records, fetches, now, summary, reason)
            )
        )
    return tasks


async def dispatch_due(
    deps: AdRulesDeps,
    tick: datetime,
    now: Callable[[], datetime],
    summary: DispatchSummary | None = None,
) -> DispatchSummary:
    """One sweep: the deferred accounts first, then every due rule (claimed in chunks of
    ``claim_batch`` while the tick's budget lasts), each dispatched."""
    summary = summary if summary is not None else DispatchSummary()
    # Checked first, every sweep: a stopped platform dispatches nothing (spec AR-23).
    if deps.stopped():
        summary.stopped = True
        return summary
    pool = _pool(deps, deps.tick_budget_seconds)
    summary.fetch = pool.stats
    pool.stats.admitting = True
    tasks: list[asyncio.Task[None]] = []
    try:
        tasks += await _resume_deferred(deps, pool, now(), summary)
        # Rules left unclaimed once the budget is spent stay due: the next tick takes them.
        while not pool.spent:
            at = now()
            claimed = await claim_due_rules(deps.db, at, deps.claim_batch)
            summary.rules += len(claimed)
            tasks += await _admit_rules(deps, pool, claimed, tick, at, summary)
            if len(claimed) < deps.claim_batch or deps.stopped():
                break
        pool.stats.admitting = False
        await asyncio.gather(*tasks, return_exceptions=True)
    except asyncio.CancelledError:
        # The tick is being cancelled: its fetches and records stop with it.
        for task in tasks:
            task.cancel()
        pool.cancel()
        raise
    finally:
        pool.stats.admitting = False
        # Every claimed rule is recorded, even when claiming a later chunk failed.
        await asyncio.gather(*tasks, return_exceptions=True)
        await pool.aclose()
    return summary


async def dispatch_now(
    deps: AdRulesDeps, *, workspace_id: int, rule_id: int, now: datetime
) -> DispatchSummary:
    """ "Run now": dispatch one active rule once, outside its schedule, through the same path as
    the sweep (fetch, batch records, one job per account, the stop checked) — its
    ``next_execution_at`` is left as it is. The batch id is in the summary (none when the rule
    is not active). No tick budget applies; each account's own deadline does."""
    summary = DispatchSummary()
    if deps.stopped():
        summary.stopped = True
    async with deps.db.read() as session:
        row = (
            await session.execute(
                scoped_select(Rule, workspace_id, Rule.id, Rule.workspace_id)
                .join(Workspace, Workspace.id == Rule.workspace_id)
                .where(Rule.id == rule_id)
            )
        ).first()
        stopped = await stopped_workspaces(session, {workspace_id})
    if row is None:
        return summary
    summary.rules = 1
    work = await _load(deps, rule_id)
    if work is None or not work.accounts:
        return summary
    environment = ENV_STOP_REASON if summary.stopped else None
    reason = environment or stopped.get(workspace_id)
    pool = _pool(deps, None)
    summary.fetch = pool.stats
    try:
        fetches = _fetches(deps, pool, work, work.accounts, reason)
        results = list(await asyncio.gather(*fetches))
    finally:
        await pool.aclose()
    # Each press is its own dispatch: a job id of its own, never deduplicated as one tick.
    ref = RuleRef(rule_id, workspace_id, job_key=f"now-{uuid.uuid4().hex[:12]}")
    await record_dispatch(
        deps, ref, work, results, tick=now, now=now, summary=summary, stopped=reason
    )
    return summary
