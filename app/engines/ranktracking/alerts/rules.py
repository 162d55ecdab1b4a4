"""Alert rules of a schedule: create, list, change and delete, with every field checked (a 422
naming the field, nothing written). A webhook's URL is refused at configuration when it points
inside the network (the sender checks it again at every connection), and its signing secret is
stored encrypted and never shown again."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select

from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking.alert_models import AlertDelivery, AlertRule
from app.engines.ranktracking.alerts.schemas import AlertRuleIn, AlertRuleOut
from app.engines.ranktracking.models import ARCHIVED, Schedule
from app.errors import NotFound, ValidationFailed
from app.integrations.http_guard import AddressGuard, OutboundError
from app.platform.crypto import SecretBox
from app.platform.validation import email_problem

MAX_RULES = 20
"""Alert rules per schedule."""


class AlertRuleNotFound(NotFound):
    code = "alert_rule_not_found"


def checked_recipients(raw: list[str], field: str = "recipients") -> list[str]:
    """Trimmed, de-duplicated addresses; an invalid one is a 422 naming its position."""
    out: list[str] = []
    for index, value in enumerate(raw):
        address = value.strip()
        if not address:
            continue
        problem = email_problem(address)
        if problem:
            raise ValidationFailed.field(f"{field}[{index}]", f"{address!r} {problem}")
        if address.casefold() not in (a.casefold() for a in out):
            out.append(address)
    return out


async def _checked(
    data: AlertRuleIn, schedule: Schedule, guard: AddressGuard, *, had_secret: bool
) -> tuple[list[str], str | None]:
    if schedule.data_type != "serp":
        raise ValidationFailed.field("schedule", "only SERP schedules have position alerts")
    if schedule.status == ARCHIVED:
        raise ValidationFailed.field("schedule", "the schedule has ended")
    if not data.name.strip():
        raise ValidationFailed.field("name", "a rule needs a name", code="required")
    if data.device is not None and data.device not in schedule.device_list:
        raise ValidationFailed.field("device", f"the schedule does not measure {data.device}")
    if data.kind != "moves" and data.threshold > (schedule.depth or 100):
        raise ValidationFailed.field(
            "threshold", f"the schedule measures the top {schedule.depth} only"
        )
    if data.channel == "email":
        recipients = checked_recipients(data.recipients)
        if not recipients:
            raise ValidationFailed.field(
                "recipients", "an e-mail alert needs at least one address", code="required"
            )
        return recipients, None
    if not data.url:
        raise ValidationFailed.field("url", "a webhook alert needs a URL", code="required")
    try:
        await guard.check_url(data.url, provider="ranktracking_alert")
    except OutboundError as exc:
        raise ValidationFailed.field("url", exc.message, code="target_refused") from exc
    if data.secret is None and not had_secret:
        raise ValidationFailed.field(
            "secret",
            "a webhook alert needs a signing secret (16 characters or more)",
            code="required",
        )
    return [], data.url


def rule_out(rule: AlertRule) -> AlertRuleOut:
    return AlertRuleOut(
        id=rule.id,
        schedule_id=rule.schedule_id,
        name=rule.name,
        kind=rule.kind,
        threshold=rule.threshold,
        device=rule.device,
        channel=rule.channel,
        recipients=list(rule.recipients or []),
        url=rule.url,
        has_secret=rule.sealed_secret is not None,
        enabled=rule.enabled,
        created_at=rule.created_at,
        updated_at=rule.updated_at,
    )


async def recent_deliveries(
    session: ReadSession, schedule_id: int, limit: int = 100
) -> list[AlertDelivery]:
    """The last ``limit`` alerts the schedule's rules fired, newest request first."""
    rows = await session.scalars(
        select(AlertDelivery)
        .where(AlertDelivery.schedule_id == schedule_id)
        .order_by(AlertDelivery.request_id.desc(), AlertDelivery.id.desc())
        .limit(limit)
    )
    return list(rows)


async def list_rules(session: ReadSession, schedule_id: int) -> list[AlertRule]:
    rows = await session.execute(
        select(AlertRule).where(AlertRule.schedule_id == schedule_id).order_by(AlertRule.id)
    )
    return list(rows.scalars())


async def create_rule(
    session: WriteSession,
    box: SecretBox,
    guard: AddressGuard,
    schedule: Schedule,
    data: AlertRuleIn,
    now: datetime,
) -> AlertRule:
    recipients, url = await _checked(data, schedule, guard, had_secret=False)
    count = await session.scalar(
        select(func.count()).select_from(AlertRule).where(AlertRule.schedule_id == schedule.id)
    )
    if (count or 0) >= MAX_RULES:
        raise ValidationFailed.field("schedule", f"at most {MAX_RULES} alert rules per schedule")
    rule = AlertRule(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        name=data.name.strip(),
        kind=data.kind,
        threshold=data.threshold,
        device=data.device,
        channel=data.channel,
        recipients=recipients or None,
        url=url,
        sealed_secret=box.encrypt(data.secret).decode() if url and data.secret else None,
        enabled=data.enabled,
        created_at=now,
        updated_at=now,
    )
    session.add(rule)
    await session.flush()
    return rule


async def get_rule(session: ReadSession, schedule: Schedule, rule_id: int) -> AlertRule:
    rule = await session.scalar(
        select(AlertRule).where(AlertRule.id == rule_id, AlertRule.schedule_id == schedule.id)
    )
    if rule is None:
        raise AlertRuleNotFound("alert rule not found")
    return rule


async def update_rule(
    session: WriteSession,
    box: SecretBox,
    guard: AddressGuard,
    schedule: Schedule,
    rule_id: int,
    data: AlertRuleIn,
    now: datetime,
) -> AlertRule:
    rule = await get_rule(session, schedule, rule_id)
    had_secret = rule.channel == "webhook" and rule.sealed_secret is not None
    recipients, url = await _checked(data, schedule, guard, had_secret=had_secret)
    rule.name = data.name.strip()
    rule.kind = data.kind
    rule.threshold = data.threshold
    rule.device = data.device
    rule.channel = data.channel
    rule.recipients = recipients or None
    rule.url = url
    if url is None:
        rule.sealed_secret = None
    elif data.secret is not None:
        rule.sealed_secret = box.encrypt(data.secret).decode()
    rule.enabled = data.enabled
    rule.updated_at = now
    await session.flush()
    return rule


async def delete_rule(session: WriteSession, schedule: Schedule, rule_id: int) -> None:
    """Deletes the rule and its deliveries (the activity feed keeps what was sent)."""
    await get_rule(session, schedule, rule_id)
    await session.execute(delete(AlertRule).where(AlertRule.id == rule_id))
