"""Rules and their tasks: create, read, replace, change status, archive (spec AR-1).

Every write validates the whole rule (:mod:`.validation`), checks that the ad accounts belong to the
workspace, and recomputes ``next_execution_at`` when the rule becomes active or its schedule changes
(AR-5). Services never commit: the caller's unit of work does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import delete, select

from app.db import keyset
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_exists, scoped_select
from app.engines.adrules.catalogue import SCHEDULED_STATUSES
from app.engines.adrules.documents import dump, load_schedule, load_task, task_body
from app.engines.adrules.due import first_execution, schedule_zone, window_of
from app.engines.adrules.errors import RuleNotFound, TaskNotFound
from app.engines.adrules.models import AdAccount, Batch, Rule, RuleAccount, Task
from app.engines.adrules.schemas import NotifyWebhook, RuleIn, TaskDocument, TaskIn
from app.engines.adrules.validation import Problems, check_rule, check_single_task
from app.engines.adrules.webhook_secrets import public_task, seal_task
from app.errors import ValidationFailed
from app.integrations.http_guard import AddressGuard, OutboundError
from app.platform import audit
from app.platform.crypto import SecretBox
from app.platform.service import get_workspace
from app.scheduling.zones import zone_or_utc


@dataclass(frozen=True, slots=True)
class RuleView:
    """A rule with everything its API and dashboard views show."""

    rule: Rule
    account_ids: list[int]
    tasks: list[TaskDocument]
    """As they may be shown: a webhook's secret is reduced to ``has_secret``."""
    last_batch_status: str | None


async def _rule(session: ReadSession, workspace_id: int, rule_id: int) -> Rule:
    rule = await session.scalar(scoped_select(Rule, workspace_id).where(Rule.id == rule_id))
    if rule is None:
        raise RuleNotFound("rule not found")
    return rule


INACTIVE_ONLY = (
    "every ad account of this rule is inactive: an active rule would never run (activate an "
    "account first, or keep the rule a draft)"
)


async def _check_accounts(session: ReadSession, workspace_id: int, data: RuleIn) -> RuleIn:
    """Check the accounts exist here (and that an active rule has an active one); returns the
    rule with its schedule's zone filled in from the accounts when it names none."""
    if not data.account_ids:
        if data.status in SCHEDULED_STATUSES:
            raise ValidationFailed.field(
                "account_ids", "an active rule needs at least one ad account", code="required"
            )
        return data
    found = {
        a.id: a
        for a in (
            await session.execute(
                scoped_select(AdAccount, workspace_id).where(AdAccount.id.in_(data.account_ids))
            )
        ).scalars()
    }
    problems = Problems()
    for i, account_id in enumerate(data.account_ids):
        if account_id not in found:
            problems.add(f"account_ids[{i}]", f"no ad account {account_id} in this workspace")
    problems.raise_if_any()
    if data.status in SCHEDULED_STATUSES and not any(a.active for a in found.values()):
        raise ValidationFailed.field("account_ids", INACTIVE_ONLY, code="accounts_inactive")
    if data.schedule.timezone is None:
        zones = {a.timezone_name for a in found.values()}
        if len(zones) == 1:
            # Meta reports each account's day in its own zone: the rule's clock is that zone.
            schedule = msgspec.structs.replace(data.schedule, timezone=zones.pop())
            return msgspec.structs.replace(data, schedule=schedule)
    return data


async def _timezone(session: ReadSession, workspace_id: int) -> str:
    return (await get_workspace(session, workspace_id)).timezone


def _schedule_columns(rule: Rule, timezone: str, now: datetime) -> None:
    """Recompute the window columns and, for an active rule, the first run (in the schedule's
    zone; ``timezone``, the workspace's, when it names none)."""
    schedule = load_schedule(rule.schedule)
    tz = schedule_zone(schedule, zone_or_utc(timezone))
    window = window_of(schedule, tz)
    rule.window_starts_at = window.starts_at
    rule.window_ends_at = window.ends_at
    rule.next_execution_at = (
        first_execution(schedule, now=now, tz=tz) if rule.status in SCHEDULED_STATUSES else None
    )


async def _replace_tasks(
    session: WriteSession, box: SecretBox, rule: Rule, tasks: list[TaskIn], now: datetime
) -> None:
    current = {
        t.id: t
        for t in (
            await session.execute(
                select(Task).where(Task.rule_id == rule.id, Task.archived_at.is_(None))
            )
        ).scalars()
    }
    problems = Problems()
    for i, task in enumerate(tasks):
        if task.id is not None and task.id not in current:
            problems.add(f"tasks[{i}].id", f"task {task.id} is not a task of this rule")
    problems.raise_if_any()
    kept: set[int] = set()
    for position, given in enumerate(tasks):
        row = current.get(given.id) if given.id is not None else None
        task = seal_task(
            given, box, previous=row.document if row else None, field=f"tasks[{position}]"
        )
        if row is None:
            row = Task(
                rule_id=rule.id,
                workspace_id=rule.workspace_id,
                created_at=now,
                position=position,
                name="",
                document={},
                updated_at=now,
            )
            session.add(row)
        row.position = position
        row.name = task.name
        row.document = task_body(task)
        row.updated_at = now
        if task.id is not None:
            kept.add(task.id)
    # Removed tasks are archived, not deleted: their records and cooldowns stay readable.
    for task_id, row in current.items():
        if task_id not in kept:
            row.archived_at = now
    await session.flush()


def _approval(data: RuleIn) -> dict[str, Any] | None:
    """What the rule stores of its approval setting (nothing when changes need none)."""
    if data.approval is None or not data.approval.required:
        return None
    return dump(data.approval)


async def _set_accounts(session: WriteSession, rule_id: int, account_ids: list[int]) -> None:
    await session.execute(delete(RuleAccount).where(RuleAccount.rule_id == rule_id))
    for account_id in account_ids:
        session.add(RuleAccount(rule_id=rule_id, ad_account_id=account_id))
    await session.flush()


async def check_webhooks(guard: AddressGuard, data: RuleIn) -> None:
    """Refuse a ``notify_webhook`` URL that points inside the network before it is stored (the
    worker's client checks it again at every connection)."""
    problems = Problems()
    for index, task in enumerate(data.tasks):
        if isinstance(task.action, NotifyWebhook):
            try:
                await guard.check_url(task.action.url, provider="notify_webhook")
            except OutboundError as exc:
                problems.add(f"tasks[{index}].action.url", exc.message, "target_refused")
    problems.raise_if_any()


async def create_rule(
    session: WriteSession,
    box: SecretBox,
    guard: AddressGuard,
    *,
    workspace_id: int,
    data: RuleIn,
    now: datetime,
) -> Rule:
    check_rule(data)
    await check_webhooks(guard, data)
    if data.status == "archived":
        raise ValidationFailed.field("status", "a new rule cannot be archived")
    data = await _check_accounts(session, workspace_id, data)
    rule = Rule(
        workspace_id=workspace_id,
        name=data.name.strip(),
        status=data.status,
        level=data.level,
        prefilters=dump(data.prefilters),
        schedule=dump(data.schedule),
        attribution_windows=data.attribution_windows,
        approval=_approval(data),
        created_at=now,
        updated_at=now,
    )
    _schedule_columns(rule, await _timezone(session, workspace_id), now)
    session.add(rule)
    await session.flush()
    await _set_accounts(session, rule.id, data.account_ids)
    await _replace_tasks(session, box, rule, data.tasks, now)
    await _audit(session, "adrule.created", rule, now, None)
    return rule


async def _audit(
    session: WriteSession, action: str, rule: Rule, now: datetime, before: str | None
) -> None:
    """A rule created or its status changed (what makes it act on ads, or stop)."""
    await audit.record(
        session,
        action=action,
        object_type="adrule",
        object_id=rule.id,
        workspace_id=rule.workspace_id,
        before=None if before is None else {"status": before},
        after={"status": rule.status, "name": rule.name},
        now=now,
    )


async def update_rule(
    session: WriteSession,
    box: SecretBox,
    guard: AddressGuard,
    *,
    workspace_id: int,
    rule_id: int,
    data: RuleIn,
    now: datetime,
) -> Rule:
    """Replace the rule. ``next_execution_at`` is recomputed when the schedule changes or the rule
    becomes active; an active rule whose schedule is unchanged keeps its next run."""
    rule = await _rule(session, workspace_id, rule_id)
    check_rule(data)
    await check_webhooks(guard, data)
    data = await _check_accounts(session, workspace_id, data)
    schedule = dump(data.schedule)
    reschedule = schedule != rule.schedule or (data.status in SCHEDULED_STATUSES) != (
        rule.status in SCHEDULED_STATUSES
    )
    rule.name = data.name.strip()
    previous = rule.status
    rule.status = data.status
    rule.level = data.level
    rule.prefilters = dump(data.prefilters)
    rule.schedule = schedule
    rule.attribution_windows = data.attribution_windows
    rule.approval = _approval(data)
    rule.updated_at = now
    if reschedule:
        _schedule_columns(rule, await _timezone(session, workspace_id), now)
    await _set_accounts(session, rule.id, data.account_ids)
    await _replace_tasks(session, box, rule, data.tasks, now)
    if previous != rule.status:
        await _audit(session, "adrule.status_changed", rule, now, previous)
    return rule


async def set_status(
    session: WriteSession, *, workspace_id: int, rule_id: int, status: str, now: datetime
) -> Rule:
    rule = await _rule(session, workspace_id, rule_id)
    if status in SCHEDULED_STATUSES and rule.status not in SCHEDULED_STATUSES:
        actives = list(
            (
                await session.execute(
                    select(AdAccount.active)
                    .join(RuleAccount, RuleAccount.ad_account_id == AdAccount.id)
                    .where(RuleAccount.rule_id == rule.id)
                )
            ).scalars()
        )
        if not actives:
            raise ValidationFailed.field(
                "account_ids", "an active rule needs at least one ad account", code="required"
            )
        if not any(actives):
            raise ValidationFailed.field("account_ids", INACTIVE_ONLY, code="accounts_inactive")
    changed = (status in SCHEDULED_STATUSES) != (rule.status in SCHEDULED_STATUSES)
    previous = rule.status
    rule.status = status
    rule.updated_at = now
    if changed:
        _schedule_columns(rule, await _timezone(session, workspace_id), now)
    await session.flush()
    if previous != status:
        await _audit(session, "adrule.status_changed", rule, now, previous)
    return rule


async def _active_tasks(session: ReadSession, rule_id: int) -> list[Task]:
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
    rule = await _rule(session, workspace_id, rule_id)
    tasks = [public_task(load_task(t)) for t in await _active_tasks(session, rule.id)]
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


def task_in(document: TaskDocument) -> TaskIn:
    return TaskIn(
        id=document.id,
        name=document.name,
        conditions=document.conditions,
        group=document.group,
        action=document.action,
        cooldown=document.cooldown,
    )


async def add_task(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    rule_id: int,
    task: TaskIn,
    now: datetime,
) -> Task:
    rule = await _rule(session, workspace_id, rule_id)
    check_single_task(task)
    if task.id is not None:
        raise ValidationFailed.field("task.id", "a new task has no id")
    task = seal_task(task, box, previous=None, field="task")
    position = len(await _active_tasks(session, rule.id))
    row = Task(
        rule_id=rule.id,
        workspace_id=workspace_id,
        position=position,
        name=task.name,
        document=task_body(task),
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    rule.updated_at = now
    await session.flush()
    return row


async def _task(session: ReadSession, rule: Rule, task_id: int) -> Task:
    row = await session.scalar(
        select(Task).where(Task.id == task_id, Task.rule_id == rule.id, Task.archived_at.is_(None))
    )
    if row is None:
        raise TaskNotFound("task not found")
    return row


async def update_task(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    rule_id: int,
    task_id: int,
    task: TaskIn,
    now: datetime,
) -> Task:
    rule = await _rule(session, workspace_id, rule_id)
    row = await _task(session, rule, task_id)
    check_single_task(task)
    task = seal_task(task, box, previous=row.document, field="task")
    row.name = task.name
    row.document = task_body(task)
    row.updated_at = now
    rule.updated_at = now
    await session.flush()
    return row


async def remove_task(
    session: WriteSession, *, workspace_id: int, rule_id: int, task_id: int, now: datetime
) -> None:
    rule = await _rule(session, workspace_id, rule_id)
    row = await _task(session, rule, task_id)
    if len(await _active_tasks(session, rule.id)) <= 1:
        raise ValidationFailed.field("tasks", "a rule needs at least one task", code="required")
    row.archived_at = now
    rule.updated_at = now
    await session.flush()


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
        await _rule(session, workspace_id, rule_id)
        query = query.where(Batch.rule_id == rule_id)
    if before_id is not None:
        query = query.where(keyset.before(Batch.id, before_id))
    rows = await session.execute(query.order_by(Batch.id.desc()).limit(limit + 1))
    return [(b, name) for b, name in rows.all()]


async def has_active_rule(session: ReadSession, workspace_id: int) -> bool:
    """Whether one of the workspace's rules is active."""
    query = select(scoped_exists(Rule, workspace_id, Rule.status == "active"))
    return bool(await session.scalar(query))


async def workspace_zone_changed(
    session: WriteSession, *, workspace_id: int, timezone: str, now: datetime
) -> int:
    """The workspace's zone changed: the scheduled rules whose schedule names no zone of its own
    follow it, so their window and next run are worked out again in the new zone (spec AR-45).
    Returns how many rules were rescheduled."""
    rules = (
        await session.scalars(
            scoped_select(Rule, workspace_id).where(Rule.status.in_(SCHEDULED_STATUSES))
        )
    ).all()
    moved = 0
    for rule in rules:
        if load_schedule(rule.schedule).timezone is None:
            _schedule_columns(rule, timezone, now)
            moved += 1
    await session.flush()
    return moved
