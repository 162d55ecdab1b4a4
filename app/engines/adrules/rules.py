"""Writing ad rules: create, replace, change status (spec AR-1); their tasks are in
:mod:`.rule_tasks`, reading them in :mod:`.rule_views`.

Every write validates the whole rule (:mod:`.validation`), checks that the ad accounts belong to the
workspace, and recomputes ``next_execution_at`` when the rule becomes active or its schedule changes
(AR-5). Services never commit: the caller's unit of work does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import delete, select

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.adrules.catalogue import SCHEDULED_STATUSES
from app.engines.adrules.documents import dump, load_schedule
from app.engines.adrules.due import first_execution, schedule_zone, window_of
from app.engines.adrules.models import AdAccount, Rule, RuleAccount
from app.engines.adrules.rule_states import RULES
from app.engines.adrules.rule_tasks import replace_tasks
from app.engines.adrules.rule_views import find_rule
from app.engines.adrules.schemas import NotifyWebhook, RuleIn
from app.engines.adrules.validation import Problems, check_rule
from app.errors import ValidationFailed
from app.integrations.http_guard import AddressGuard, OutboundError
from app.platform import audit
from app.platform.crypto import SecretBox
from app.platform.service import get_workspace
from app.scheduling.zones import zone_or_utc

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
        **RULES.create(data.status),
        workspace_id=workspace_id,
        name=data.name.strip(),
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
    await replace_tasks(session, box, rule, data.tasks, now)
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
    rule = await find_rule(session, workspace_id, rule_id)
    check_rule(data)
    await check_webhooks(guard, data)
    data = await _check_accounts(session, workspace_id, data)
    schedule = dump(data.schedule)
    reschedule = schedule != rule.schedule or (data.status in SCHEDULED_STATUSES) != (
        rule.status in SCHEDULED_STATUSES
    )
    rule.name = data.name.strip()
    previous = rule.status
    RULES.move(rule, data.status)
    rule.level = data.level
    rule.prefilters = dump(data.prefilters)
    rule.schedule = schedule
    rule.attribution_windows = data.attribution_windows
    rule.approval = _approval(data)
    rule.updated_at = now
    if reschedule:
        _schedule_columns(rule, await _timezone(session, workspace_id), now)
    await _set_accounts(session, rule.id, data.account_ids)
    await replace_tasks(session, box, rule, data.tasks, now)
    if previous != rule.status:
        await _audit(session, "adrule.status_changed", rule, now, previous)
    return rule


async def set_status(
    session: WriteSession, *, workspace_id: int, rule_id: int, status: str, now: datetime
) -> Rule:
    rule = await find_rule(session, workspace_id, rule_id)
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
    RULES.move(rule, status)
    rule.updated_at = now
    if changed:
        _schedule_columns(rule, await _timezone(session, workspace_id), now)
    await session.flush()
    if previous != status:
        await _audit(session, "adrule.status_changed", rule, now, previous)
    return rule


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
