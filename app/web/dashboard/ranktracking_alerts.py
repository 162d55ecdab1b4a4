"""The schedule page's alerts, e-mail report and competitor summary: a form per alert rule (no
JSON), its list with edit and delete, the report's period and recipients, and who gained and who
lost among the tracked domain and its competitors.

A form that breaks a rule is shown again with what was typed and the message next to the form,
each field named by its label."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.engines.ranktracking.alerts import report, rules
from app.engines.ranktracking.alerts.decide import describe
from app.engines.ranktracking.alerts.schemas import AlertRuleIn, ReportSettingsIn
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.reports.rivals import who_gained
from app.engines.ranktracking.schedules import lookup
from app.errors import DomainError, ValidationFailed
from app.integrations.http_guard import AddressGuard
from app.platform.crypto import SecretBox
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import error_messages, page
from app.web.deps import CurrentClock, Guard, Reads, Secrets, Writes

PREFIX = "/ui/ranktracking/schedules/{schedule_id:int}"
KINDS = [
    ("enters_top", "a keyword enters the top N"),
    ("leaves_top", "a keyword leaves the top N"),
    ("moves", "a keyword moves by N places or more"),
]
LABELS = {
    "name": "Name",
    "kind": "When",
    "threshold": "N",
    "device": "Device",
    "channel": "Send by",
    "recipients": "E-mail addresses",
    "url": "Webhook URL",
    "secret": "Signing secret",
    "schedule": "Schedule",
    "period": "Report",
}
_FIELD = re.compile(r"at `\$\.(\w+)")


class AlertForm(msgspec.Struct, kw_only=True):
    """The alert form as the browser posts it (all text; the checkbox "on" or absent)."""

    name: str = ""
    kind: str = "enters_top"
    threshold: str = "10"
    device: str = ""
    channel: str = "email"
    recipients: str = ""
    url: str = ""
    secret: str = ""
    enabled: str = ""


class ReportForm(msgspec.Struct, kw_only=True):
    period: str = "weekly"
    recipients: str = ""
    enabled: str = ""


def addresses(text: str) -> list[str]:
    return [a for a in re.split(r"[\s,;]+", text) if a]


def _convert(values: dict[str, Any], kind: type[Any]) -> Any:
    """The form's values as the API's struct; a bad value is a 422 naming its field."""
    try:
        return msgspec.convert(values, kind)
    except msgspec.ValidationError as exc:
        found = _FIELD.search(str(exc))
        field = found.group(1) if found else "form"
        raise ValidationFailed.field(field, str(exc).split(" - at ")[0]) from exc


def alert_in(form: AlertForm) -> AlertRuleIn:
    threshold = form.threshold.strip()
    if not threshold.isdigit():
        raise ValidationFailed.field("threshold", "a whole number from 1 to 100")
    values: dict[str, Any] = {
        "name": form.name.strip(),
        "kind": form.kind,
        "threshold": int(threshold),
        "device": form.device or None,
        "channel": form.channel,
        "recipients": addresses(form.recipients) if form.channel == "email" else [],
        "url": form.url.strip() or None if form.channel == "webhook" else None,
        "secret": form.secret or None if form.channel == "webhook" else None,
        "enabled": bool(form.enabled),
    }
    converted: AlertRuleIn = _convert(values, AlertRuleIn)
    return converted


def form_of(rule: Any) -> AlertForm:
    return AlertForm(
        name=rule.name,
        kind=rule.kind,
        threshold=str(rule.threshold),
        device=rule.device or "",
        channel=rule.channel,
        recipients="\n".join(rule.recipients),
        url=rule.url or "",
        enabled="on" if rule.enabled else "",
    )


async def schedule_extras(session: ReadSession, schedule: Schedule) -> dict[str, Any]:
    """What the schedule page shows of alerts, the report and the competitors' summary."""
    if schedule.data_type != "serp":
        return {"alert_rules": [], "report": None, "rivals": None}
    found = await rules.list_rules(session, schedule.id)
    return {
        "alert_rules": [
            {**msgspec.to_builtins(rules.rule_out(r)), "when": describe(r.kind, r.threshold)}
            for r in found
        ],
        "alert_kinds": KINDS,
        "new_alert": AlertForm(enabled="on"),
        "report": report.settings_out(schedule.id, await report.get_settings(session, schedule.id)),
        "rivals": await who_gained(session, schedule),
    }


def _back(schedule_id: int, text: str, anchor: str = "rt-alerts") -> Redirect:
    return Redirect(f"/ui/ranktracking/schedules/{schedule_id}?notice={quote(text)}#{anchor}")


def _form_page(
    request: Request[Any, Any, Any],
    principal: Principal,
    schedule: Schedule,
    form: AlertForm,
    *,
    rule_id: int | None,
    errors: list[str] | None = None,
    has_secret: bool = False,
) -> Template:
    return page(
        request,
        "ranktracking/alert.html",
        principal,
        schedule=schedule,
        form=form,
        rule_id=rule_id,
        errors=errors or [],
        has_secret=has_secret,
        alert_kinds=KINDS,
    )


async def _save(
    request: Request[Any, Any, Any],
    principal: Principal,
    uow: UnitOfWork,
    machinery: tuple[SecretBox, AddressGuard, Clock],
    schedule_id: int,
    rule_id: int | None,
    form: AlertForm,
) -> Template | Redirect:
    secrets, guard, clock = machinery
    try:
        data = alert_in(form)
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            now = clock.now()
            if rule_id is None:
                rule = await rules.create_rule(uow.session, secrets, guard, schedule, data, now)
            else:
                rule = await rules.update_rule(
                    uow.session, secrets, guard, schedule, rule_id, data, now
                )
            text = f'Alert "{rule.name}" saved: {describe(rule.kind, rule.threshold)}'
        return _back(schedule_id, text)
    except DomainError as exc:
        if exc.status == 404:
            raise
        session = uow.session
        schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
        stored = await rules.get_rule(session, schedule, rule_id) if rule_id else None
        form = msgspec.structs.replace(form, secret="")  # a secret is never echoed back
        return _form_page(
            request,
            principal,
            schedule,
            form,
            rule_id=rule_id,
            errors=error_messages(exc, LABELS),
            has_secret=bool(stored and stored.sealed_secret),
        )


@post(f"{PREFIX}/alerts")
async def create_alert(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    data: URLEncodedBody[AlertForm],
) -> Template | Redirect:
    return await _save(request, principal, uow, (secrets, guard, clock), schedule_id, None, data)


@get(f"{PREFIX}/alerts/{{alert_id:int}}")
async def alert_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: FromPath[int],
    alert_id: FromPath[int],
) -> Template:
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    rule = await rules.get_rule(session, schedule, alert_id)
    return _form_page(
        request,
        principal,
        schedule,
        form_of(rules.rule_out(rule)),
        rule_id=alert_id,
        has_secret=rule.sealed_secret is not None,
    )


@post(f"{PREFIX}/alerts/{{alert_id:int}}")
async def update_alert(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    alert_id: FromPath[int],
    data: URLEncodedBody[AlertForm],
) -> Template | Redirect:
    return await _save(
        request, principal, uow, (secrets, guard, clock), schedule_id, alert_id, data
    )


@post(f"{PREFIX}/alerts/{{alert_id:int}}/delete")
async def delete_alert(
    principal: CurrentPrincipal,
    uow: Writes,
    schedule_id: FromPath[int],
    alert_id: FromPath[int],
) -> Redirect:
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await rules.delete_rule(uow.session, schedule, alert_id)
    return _back(schedule_id, "Alert deleted")


@post(f"{PREFIX}/report")
async def report_form(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    schedule_id: FromPath[int],
    data: URLEncodedBody[ReportForm],
) -> Redirect:
    try:
        settings: ReportSettingsIn = _convert(
            {
                "period": data.period,
                "recipients": addresses(data.recipients),
                "enabled": bool(data.enabled),
            },
            ReportSettingsIn,
        )
        async with uow.attempt():
            schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
            setting = await report.put_settings(uow.session, schedule, settings, clock.now())
            text = (
                f"{setting.period.capitalize()} report on: the next one goes out "
                f"{setting.next_due_at:%Y-%m-%d %H:%M} UTC"
                if setting.enabled
                else "E-mail report off"
            )
    except DomainError as exc:
        if exc.status == 404:
            raise
        text = " ".join(error_messages(exc, LABELS))
    return _back(schedule_id, text, "rt-report")


ROUTES: list[Any] = [create_alert, alert_page, update_alert, delete_alert, report_form]
