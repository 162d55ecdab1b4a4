"""Reading ad rules (spec AR-1): a rule with its accounts, tasks and last batch as its API and
dashboard views show it, the rule list, the batch records, and the lookups the writes share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.db import keyset
from app.db.session import ReadSession
from app.db.tenancy import scoped_exists, scoped_select
from app.engines.adrules.documents import load_task
from app.engines.adrules.errors import RuleNotFound
from app.engines.adrules.models import Batch, Rule, RuleAccount, Task
from app.engines.adrules.schemas import TaskDocument
from app.engines.adrules.webhook_secrets import public_task


@dataclass(frozen=True, slots=True)
class RuleView:
    """A rule with everything its API and dashboard views show."""

    rule: Rule
    account_ids: list[int]
    tasks: list[TaskDocument]
    """As they may be shown: a webhook's secret is reduced to ``has_secret``."""
    last_batch_status: str | None


async def find_rule(session: ReadSession, workspace_id: int, rule_id: int) -> Rule:
    """The workspace's rule ``rule_id``; :class:`RuleNotFound` when it has none."""
    rule = await session.scalar(scoped_select(Rule, workspace_id).where(Rule.id == rule_id))
    if rule is None:
        raise RuleNotFound("rule not found")
    return rule


async def active_tasks(session: ReadSession, rule_id: int) -> list[Task]:
    return list(
        (
            await session.execute(
                select(Task)
                .where(Task.rule_id == rule_id, Task.archived_at.is_(None))
                .order_by(Task.position, Task.id)
            )
        ).scalars()
    )


async def _account_ids(session: ReadSession, rule_ids: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {rid: [] for rid in rule_ids}
    if not rule_ids:
        return out
    rows = await session.execute(
        select(RuleAccount.rule_id, RuleAccount.ad_account_id)
        .where(RuleAccount.rule_id.in_(rule_ids))
        .order_by(RuleAccount.ad_account_id)
    )
    for rule_id, account_id in rows.all():
        out[rule_id].append(account_id)
    return out


def batch_status(statuses: list[str]) -> str | None:
    """One word for a dispatch over several accounts: the worst account's status wins."""
    if not statuses:
        return None
    for status in ("failed", "skipped", "deferred", "running", "queued", "completed", "empty"):
        if status in statuses:
            return status
    return statuses[0]


async def _last_batch_statuses(session: ReadSession, rules: list[Rule]) -> dict[int, str | None]:
    ids = [r.last_batch_id for r in rules if r.last_batch_id]
    by_batch: dict[str, list[str]] = {}
    if ids:
        rows = await session.execute(
            select(Batch.batch_id, Batch.status).where(Batch.batch_id.in_(ids))
        )
        for batch_id, status in rows.all():
            by_batch.setdefault(batch_id, []).append(status)
    return {
        r.id: batch_status(by_batch.get(r.last_batch_id, [])) if r.last_batch_id else None
        for r in rules
    }


async def view_rule(session: ReadSession, *, workspace_id: int, rule_id: int) -> RuleView:
    rule = await find_rule(session, workspace_id, rule_id)
    tasks = [public_task(load_task(t)) for t in await active_tasks(session, rule.id)]
    accounts = (await _account_ids(session, [rule.id]))[rule.id]
    status = (await _last_batch_statuses(session, [rule]))[rule.id]
    return RuleView(rule, accounts, tasks, status)


async def list_rules(
    session: ReadSession,
    *,
    workspace_id: int,
    status: str | None = None,
    after_id: int | None = None,
    limit: int = 50,
) -> list[RuleView]:
    """Rules newest first; ``limit + 1`` are read so the caller can tell there are more."""
    query = scoped_select(Rule, workspace_id)
    if status is not None:
        query = query.where(Rule.status == status)
    if after_id is not None:
        query = query.where(Rule.id < after_id)
    rules = list((await session.execute(query.order_by(Rule.id.desc()).limit(limit + 1))).scalars())
    accounts = await _account_ids(session, [r.id for r in rules])
    statuses = await _last_batch_statuses(session, rules)
    task_rows = (
        await session.execute(
            select(Task)
            .where(Task.rule_id.in_([r.id for r in rules]), Task.archived_at.is_(None))
            .order_by(Task.position, Task.id)
        )
    ).scalars()
    tasks: dict[int, list[TaskDocument]] = {r.id: [] for r in rules}
    for task in task_rows:
        tasks[task.rule_id].append(public_task(load_task(task)))
    return [RuleView(r, accounts[r.id], tasks[r.id], statuses[r.id]) for r in rules]


async def list_batches(
    session: ReadSession,
    *,
    workspace_id: int,
    rule_id: int | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[tuple[Batch, str]]:
    """Batch records newest first, with their rule's name."""
    query: Any = scoped_select(Batch, workspace_id, Batch, Rule.name).join(
        Rule, Rule.id == Batch.rule_id
    )
    if rule_id is not None:
        await find_rule(session, workspace_id, rule_id)
        query = query.where(Batch.rule_id == rule_id)
    if before_id is not None:
        query = query.where(keyset.before(Batch.id, before_id))
    rows = await session.execute(query.order_by(Batch.id.desc()).limit(limit + 1))
    return [(b, name) for b, name in rows.all()]


async def has_active_rule(session: ReadSession, workspace_id: int) -> bool:
    """Whether one of the workspace's rules is active."""
    query = select(scoped_exists(Rule, workspace_id, Rule.status == "active"))
    return bool(await session.scalar(query))
