"""Alert rules and the e-mail report of a schedule in the JSON API under
``/api/v1/ranktracking/schedules/{id}``: rules created, listed, changed and deleted (every field
checked, a 422 naming it), the alerts each rule sent, and the weekly or monthly report settings.

Every lookup is scoped by the caller's workspace: another workspace's schedule answers 404."""

from __future__ import annotations

from typing import Any

from litestar import delete, get, post, put
from litestar.params import JSONBody

from app.engines.ranktracking.alerts import report, rules
from app.engines.ranktracking.alerts.schemas import (
    AlertDeliveryList,
    AlertDeliveryOut,
    AlertRuleIn,
    AlertRuleList,
    AlertRuleOut,
    ReportSettingsIn,
    ReportSettingsOut,
)
from app.engines.ranktracking.schedules import lookup
from app.web.api.common import RowId
from app.web.auth import CurrentPrincipal
from app.web.deps import CurrentClock, Guard, Reads, Secrets, Writes

RULES = "/schedules/{schedule_id:int}/alerts"


@get(RULES)
async def list_alert_rules(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId
) -> AlertRuleList:
    """The schedule's alert rules (a webhook's secret is never shown: ``has_secret``)."""
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    found = await rules.list_rules(session, schedule_id)
    return AlertRuleList(items=[rules.rule_out(r) for r in found])


@post(RULES)
async def create_alert_rule(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    guard: Guard,
    schedule_id: RowId,
    data: JSONBody[AlertRuleIn],
) -> AlertRuleOut:
    """A rule: a keyword enters or leaves the top N, or moves by K places or more; sent once per
    measured run by e-mail or by a webhook signed with its secret (``X-Sweepline-Signature``)."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    rule = await rules.create_rule(uow.session, secrets, guard, schedule, data, clock.now())
    return rules.rule_out(rule)


@put(f"{RULES}/{{rule_id:int}}")
async def update_alert_rule(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    guard: Guard,
    schedule_id: RowId,
    rule_id: RowId,
    data: JSONBody[AlertRuleIn],
) -> AlertRuleOut:
    """Replace a rule (a webhook without ``secret`` keeps the stored one)."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    rule = await rules.update_rule(
        uow.session, secrets, guard, schedule, rule_id, data, clock.now()
    )
    return rules.rule_out(rule)


@delete(f"{RULES}/{{rule_id:int}}")
async def delete_alert_rule(
    principal: CurrentPrincipal, uow: Writes, schedule_id: RowId, rule_id: RowId
) -> None:
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await rules.delete_rule(uow.session, schedule, rule_id)


@get(f"{RULES}/deliveries")
async def list_alert_deliveries(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId
) -> AlertDeliveryList:
    """The alerts the schedule's rules fired, newest request first (the last 100)."""
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    found = await rules.recent_deliveries(session, schedule_id)
    items = [
        AlertDeliveryOut(
            id=d.id,
            rule_id=d.rule_id,
            request_id=d.request_id,
            channel=d.channel,
            state=d.state,
            attempts=d.attempts,
            error=d.error,
            matches=list(d.matches),
            created_at=d.created_at,
            sent_at=d.sent_at,
        )
        for d in found
    ]
    return AlertDeliveryList(items=items)


@get("/schedules/{schedule_id:int}/report")
async def get_report_settings(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId
) -> ReportSettingsOut:
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return report.settings_out(schedule_id, await report.get_settings(session, schedule_id))


@put("/schedules/{schedule_id:int}/report")
async def put_report_settings(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: RowId,
    data: JSONBody[ReportSettingsIn],
) -> ReportSettingsOut:
    """The weekly (Monday to Monday, UTC) or monthly e-mail report: the period's summary, its
    biggest movers and a link to the page, sent once when each period ends."""
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    setting = await report.put_settings(uow.session, schedule, data, clock.now())
    return report.settings_out(schedule_id, setting)


HANDLERS: list[Any] = [
    list_alert_rules,
    create_alert_rule,
    update_alert_rule,
    delete_alert_rule,
    list_alert_deliveries,
    get_report_settings,
    put_report_settings,
]
