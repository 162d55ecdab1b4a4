"""What one dispatch needs of a claimed rule: its document, its ad accounts, its pre-filters as
Graph ``filtering`` and its workspace's access token; and the summary a sweep returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from app.db.session import ReadSession
from app.db.tenancy import scoped_select
from app.engines.adrules.catalogue import SCHEDULED_STATUSES
from app.engines.adrules.claim.pool import FetchStats
from app.engines.adrules.claim.prefilters import targets_not_deliverable, to_filtering
from app.engines.adrules.documents import load_schedule, rule_document
from app.engines.adrules.models import META_TOKEN_SECRET, AdAccount, Rule, RuleAccount, Task
from app.engines.adrules.schemas import RuleDocument
from app.platform.crypto import SecretBox
from app.platform.service import get_secret


@dataclass(slots=True)
class DispatchSummary:
    """What one sweep did (logged, and read by tests and the benchmark)."""

    stopped: bool = False
    rules: int = 0
    jobs: int = 0
    skipped_accounts: int = 0
    empty_accounts: int = 0
    deferred_accounts: int = 0
    """Accounts the tick's budget left for the next tick (their batch records say so)."""
    resumed_accounts: int = 0
    """Accounts an earlier tick deferred, taken first by this one."""
    batch_ids: list[str] = field(default_factory=list)
    fetch: FetchStats = field(default_factory=FetchStats)
    """The fetch pool's live counts (the same object while the sweep runs)."""


@dataclass(frozen=True, slots=True)
class AccountRow:
    id: int
    meta_id: str
    currency: str
    timezone_name: str
    active: bool = True


@dataclass(frozen=True, slots=True)
class RuleWork:
    document: RuleDocument
    accounts: list[AccountRow]
    filtering: list[dict[str, Any]]
    token: str | None
    asked_hidden: frozenset[str] = frozenset()
    """Non-deliverable statuses the rule's pre-filters name explicitly."""


async def load_rule_work(session: ReadSession, secrets: SecretBox, rule_id: int) -> RuleWork | None:
    """The rule's work, or None when it is no longer active or shadow (paused or archived between
    the claim and now: the person's latest word wins)."""
    rule = await session.get(Rule, rule_id)
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
        AccountRow(a.id, a.meta_id, a.currency, a.timezone_name, a.active)
        for a in (
            await session.execute(
                scoped_select(AdAccount, rule.workspace_id)
                .join(RuleAccount, RuleAccount.ad_account_id == AdAccount.id)
                .where(RuleAccount.rule_id == rule.id)
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
    return RuleWork(
        document,
        accounts,
        to_filtering(document.prefilters),
        token,
        targets_not_deliverable(document.prefilters),
    )
