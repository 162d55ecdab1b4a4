"""Ad rules dashboard pages: rules (status, next run, last batch), the rule editor with validation
messages beside the fields and the batch log; ad accounts and the Meta connection are in
:mod:`.adrules_accounts`.

The editor posts a plain form; it is turned into the same :class:`RuleIn` the JSON API takes and goes
through the same services, so a rule is valid in one place or in neither.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar import Request, get, post
from litestar.datastructures import FormMultiDict
from litestar.params import FromPath
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.engines.adrules import accounts as account_service
from app.engines.adrules import rule_tasks, rule_views, stops
from app.engines.adrules import rules as rule_service
from app.engines.adrules.catalogue import (
    COOLDOWN_LABELS,
    EFFECTIVE_STATUSES,
    LEVELS,
    METRICS,
    OPERATOR_SYMBOLS,
    PERIODS,
    RULE_STATUSES,
    WEEKDAYS,
)
from app.engines.adrules.connection import service as connection_service
from app.engines.adrules.documents import load_prefilters, load_schedule
from app.engines.adrules.schemas import RuleIn, TimetableSchedule
from app.engines.adrules.templates import FromTemplateIn, get_template
from app.engines.adrules.validation import check_rule
from app.errors import ValidationFailed
from app.integrations.http_guard import AddressGuard
from app.platform.crypto import SecretBox
from app.platform.service import Principal
from app.web.api import adrules_stop as stop_api
from app.web.api.adrules import run_rule_now as run_now_service
from app.web.api.adrules_stop import StopIn
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard import adrules_accounts, adrules_backtest, adrules_log
from app.web.dashboard.adrules_labels import RULE_LABELS
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, CurrentSettings, Guard, Reads, Secrets, Writes
from app.web.plain_errors import plain_error, split_path

AnyRequest = Request[Any, Any, Any]

NAV: list[tuple[str, str]] = [("/ui/adrules", "Ad rules"), *adrules_log.NAV]
"""(href, label) links this engine adds to the navigation bar."""

EXAMPLE_TASKS = [
    {
        "name": "Flag losers",
        "conditions": [
            {
                "type": "metric_value",
                "metric": "purchase_roas",
                "period": "last_7d",
                "operator": "lt",
                "value": "1.2",
            }
        ],
        "group": "and",
        "action": {"type": "log_only"},
        "cooldown": "1h",
    }
]

_AT_PATH = re.compile(r" - at `\$\.?([^`]*)`")


def _pretty(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def _csv(raw: str) -> list[str]:
    return [part.strip() for part in raw.replace("\n", ",").split(",") if part.strip()]


def _number(raw: str) -> Any:
    raw = raw.strip()
    return int(raw) if raw.isdigit() else raw


def form_to_rule(form: FormMultiDict) -> tuple[dict[str, Any], dict[str, str]]:
    """The rule document a form describes, and the errors found while reading it."""
    errors: dict[str, str] = {}
    prefilters: dict[str, Any] = {"campaign_ids": _csv(form.get("campaign_ids", ""))}
    if form.get("name_contains", "").strip():
        prefilters["name_contains"] = form.get("name_contains", "")
    statuses = form.getall("status_values") if "status_values" in form else []
    if statuses:
        prefilters["effective_status"] = {
            "operator": form.get("status_operator", "in"),
            "values": statuses,
        }
    schedule: dict[str, Any] = {"mode": form.get("mode", "interval")}
    if schedule["mode"] == "timetable":
        schedule["week"] = {day: _csv(form.get(f"week_{day}", "")) for day in WEEKDAYS}
    else:
        schedule["minutes"] = _number(form.get("minutes", "60") or "60")
    for key in ("start_date", "end_date", "timezone"):
        if form.get(key, "").strip():
            schedule[key] = form.get(key, "").strip()
    tasks: Any = []
    try:
        tasks = msgspec.json.decode(form.get("tasks_json", "") or "[]")
    except msgspec.DecodeError as exc:
        errors["tasks"] = f"is not valid JSON ({exc})"
    account_ids = form.getall("account_ids") if "account_ids" in form else []
    document = {
        "name": form.get("name", ""),
        "status": form.get("status", "draft"),
        "level": form.get("level", "campaign"),
        "account_ids": [_number(a) for a in account_ids],
        "prefilters": prefilters,
        "schedule": schedule,
        "tasks": tasks,
        "attribution_windows": _windows_from_form(form),
    }
    if form.get("approval_required"):
        # Changes wait for a member's approval within the window (AR-28).
        document["approval"] = {
            "required": True,
            "window_hours": _number(form.get("approval_window_hours", "24") or "24"),
        }
    return document, errors


def _windows_from_form(form: FormMultiDict) -> list[str] | None:
    """The attribution windows the form chose (spec AR-41): a click window and the view ones
    ticked; none at all means each ad set's own setting."""
    click = form.get("attribution_click", "").strip()
    windows = ([click] if click else []) + (
        form.getall("attribution_views") if "attribution_views" in form else []
    )
    return windows or None


def _attribution_values(windows: list[str] | None) -> dict[str, Any]:
    chosen = windows or []
    return {
        "attribution_click": next((w for w in chosen if w.endswith("_click")), ""),
        "attribution_views": [w for w in chosen if not w.endswith("_click")],
    }


def _field_errors(exc: ValidationFailed) -> dict[str, str]:
    out: dict[str, str] = {}
    for detail in exc.details:
        out.setdefault(str(detail.get("field", "")), str(detail.get("message", "")))
    return out


def errors_by_input(errors: dict[str, str]) -> dict[str, list[str]]:
    """Group error paths under the form input that shows them."""
    grouped: dict[str, list[str]] = {}
    for path, message in errors.items():
        if path.startswith("tasks"):
            key = "tasks"
        elif path.startswith("schedule.week"):
            key = "week"
        elif path.startswith("schedule."):
            key = path.split(".")[1].split("[")[0]
        elif path.startswith("prefilters.effective_status"):
            key = "status_values"
        elif path.startswith("prefilters."):
            key = path.split(".")[1].split("[")[0]
        else:
            key = path.split(".")[0].split("[")[0] or "form"
        grouped.setdefault(key, []).append(message)
    return grouped


def shown_errors(errors: dict[str, str]) -> dict[str, str]:
    """The errors as the editor shows them, keyed by the field's path (a key msgspec names in
    its message folded in, so the builder pins it on that input) and said by the one policy:
    the field's label and what it allows."""
    shown: dict[str, str] = {}
    for path, message in errors.items():
        field, _ = split_path(path, message)
        shown.setdefault(field, plain_error(path, message, RULE_LABELS))
    return shown


def parse_rule(document: dict[str, Any]) -> RuleIn:
    """Decode like the API does; msgspec's path becomes the field of a ValidationFailed."""
    try:
        return msgspec.convert(document, RuleIn)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _AT_PATH.search(message)
        field = match.group(1) if match else ""
        raise ValidationFailed.field(field, _AT_PATH.sub("", message)) from None


async def _editor(
    request: AnyRequest,
    principal: Principal,
    session: ReadSession,
    *,
    rule_id: int | None,
    values: dict[str, Any],
    errors: dict[str, str],
    view: rule_views.RuleView | None = None,
) -> Template:
    accounts = await account_service.list_accounts(session, principal.workspace_id)
    shown = shown_errors(errors)
    template = page(
        request,
        "adrules/rule_edit.html",
        principal,
        rule_id=rule_id,
        view=view,
        values=values,
        errors=errors_by_input(shown),
        task_errors={k: v for k, v in shown.items() if k.startswith("tasks")},
        catalogue=builder_catalogue(),
        accounts=accounts,
        statuses=RULE_STATUSES,
        levels=LEVELS,
        effective_statuses=EFFECTIVE_STATUSES,
        weekdays=WEEKDAYS,
        cooldowns=COOLDOWN_LABELS,
        saved=request.query_params.get("saved") == "1" and not errors,
    )
    if errors:
        template.status_code = 422
    return template


def _values_from_view(view: rule_views.RuleView) -> dict[str, Any]:
    rule = view.rule
    prefilters = load_prefilters(rule.prefilters)
    schedule = load_schedule(rule.schedule)
    tasks = [msgspec.to_builtins(rule_tasks.task_in(t)) for t in view.tasks]
    week = (
        {d: ", ".join(schedule.week.slots(i)) for i, d in enumerate(WEEKDAYS)}
        if isinstance(schedule, TimetableSchedule)
        else {}
    )
    return {
        "name": rule.name,
        "status": rule.status,
        "level": rule.level,
        "account_ids": [str(a) for a in view.account_ids],
        "campaign_ids": ", ".join(prefilters.campaign_ids),
        "name_contains": prefilters.name_contains or "",
        "status_operator": prefilters.effective_status.operator
        if prefilters.effective_status
        else "in",
        "status_values": list(prefilters.effective_status.values)
        if prefilters.effective_status
        else [],
        "mode": "timetable" if isinstance(schedule, TimetableSchedule) else "interval",
        "minutes": getattr(schedule, "minutes", 60),
        "week": week,
        "start_date": str(schedule.start_date or ""),
        "end_date": str(schedule.end_date or ""),
        "timezone": schedule.timezone or "",
        "tasks_json": _pretty(tasks),
        **_attribution_values(rule.attribution_windows),
        **_approval_values(rule.approval),
    }


def _values_from_rule_in(rule: RuleIn) -> dict[str, Any]:
    """Editor values for a rule document not saved yet (a template opened in the builder)."""
    schedule = rule.schedule
    week = (
        {d: ", ".join(schedule.week.slots(i)) for i, d in enumerate(WEEKDAYS)}
        if isinstance(schedule, TimetableSchedule)
        else {}
    )
    status = rule.prefilters.effective_status
    return {
        "name": rule.name,
        "status": rule.status,
        "level": rule.level,
        "account_ids": [str(a) for a in rule.account_ids],
        "campaign_ids": ", ".join(rule.prefilters.campaign_ids),
        "name_contains": rule.prefilters.name_contains or "",
        "status_operator": status.operator if status else "in",
        "status_values": list(status.values) if status else [],
        "mode": "timetable" if isinstance(schedule, TimetableSchedule) else "interval",
        "minutes": getattr(schedule, "minutes", 60),
        "week": week,
        "start_date": str(schedule.start_date or ""),
        "end_date": str(schedule.end_date or ""),
        "timezone": schedule.timezone or "",
        "tasks_json": _pretty(msgspec.to_builtins(rule.tasks)),
        **_attribution_values(rule.attribution_windows),
        **_approval_values(msgspec.to_builtins(rule.approval) if rule.approval else None),
    }


def _approval_values(approval: dict[str, Any] | None) -> dict[str, Any]:
    required = bool(approval and approval.get("required", True))
    hours = (approval or {}).get("window_hours", 24)
    return {"approval_required": required, "approval_window_hours": hours}


def builder_catalogue() -> dict[str, Any]:
    """The vocabularies the rule builder's selects offer (the same the schemas accept)."""
    return {
        "metrics": list(METRICS),
        "periods": list(PERIODS),
        "operators": OPERATOR_SYMBOLS,
        # Pairs, not a mapping: ``tojson`` sorts a mapping's keys, which put "12 hours" before
        # "15 minutes"; the list keeps the catalogue's order, shortest first.
        "cooldowns": [[key, label] for key, label in COOLDOWN_LABELS.items()],
        "weekdays": list(WEEKDAYS),
    }


def _values_from_form(form: FormMultiDict) -> dict[str, Any]:
    return {
        "name": form.get("name", ""),
        "status": form.get("status", "draft"),
        "level": form.get("level", "campaign"),
        "account_ids": form.getall("account_ids") if "account_ids" in form else [],
        "campaign_ids": form.get("campaign_ids", ""),
        "name_contains": form.get("name_contains", ""),
        "status_operator": form.get("status_operator", "in"),
        "status_values": form.getall("status_values") if "status_values" in form else [],
        "mode": form.get("mode", "interval"),
        "minutes": form.get("minutes", "60"),
        "week": {d: form.get(f"week_{d}", "") for d in WEEKDAYS},
        "start_date": form.get("start_date", ""),
        "end_date": form.get("end_date", ""),
        "timezone": form.get("timezone", ""),
        "tasks_json": form.get("tasks_json", ""),
        "attribution_click": form.get("attribution_click", ""),
        "attribution_views": form.getall("attribution_views")
        if "attribution_views" in form
        else [],
        "approval_required": bool(form.get("approval_required")),
        "approval_window_hours": form.get("approval_window_hours", "24"),
    }


# -- rules ----------------------------------------------------------------------------------------


@get("/ui/adrules")
async def rules_page(
    request: AnyRequest,
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    clock: CurrentClock,
) -> Template:
    views = await rule_views.list_rules(session, workspace_id=principal.workspace_id, limit=200)
    has_token = await account_service.has_token(session, principal.workspace_id)
    now = clock.now()
    connection = await connection_service.connection_view(session, principal.workspace_id, now=now)
    stop = await stops.stop_state(session, principal.workspace_id, settings.sweepers.stop_all)
    return page(
        request,
        "adrules/rules.html",
        principal,
        views=views[:200],
        has_token=has_token,
        connection=connection,
        now=now,
        stop=stop,
    )


@post("/ui/adrules/rules/{rule_id:int}/run")
async def run_rule_now(
    principal: CurrentPrincipal, runtime: CurrentRuntime, rule_id: FromPath[int]
) -> Redirect:
    """The rule page's "Run now" button: dispatch once, then show the rule's runs."""
    await run_now_service(runtime, principal.workspace_id, rule_id)
    return Redirect(f"/ui/adrules/log?rule_id={rule_id}")


@post("/ui/adrules/stop")
async def change_stop(
    request: AnyRequest,
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
) -> Redirect:
    """The runtime stop switch (AR-23): an admin turns the workspace's or the organisation's on
    or off."""
    form = await request.form()
    scope = form.get("scope", "")
    if scope != "organisation" and scope != "workspace":
        raise ValidationFailed.field("scope", "must be 'organisation' or 'workspace'")
    data = StopIn(
        scope="organisation" if scope == "organisation" else "workspace",
        stopped=form.get("stopped", "") == "true",
        reason=str(form.get("reason", ""))[:500],
    )
    await stop_api.apply_stop(
        uow, principal, data, now=clock.now(), stop_all=settings.sweepers.stop_all
    )
    return Redirect("/ui/adrules")


@get("/ui/adrules/rules/new")
async def new_rule_page(
    request: AnyRequest, principal: CurrentPrincipal, session: Reads
) -> Template:
    values: dict[str, Any] = {
        "status": "draft",
        "level": "campaign",
        "mode": "interval",
        "minutes": 60,
        "week": {},
        "tasks_json": _pretty(EXAMPLE_TASKS),
        "account_ids": [],
        "status_values": [],
        "status_operator": "in",
    }
    key = request.query_params.get("template")
    if key:
        # A template opens in the builder with its default thresholds, saved only when asked.
        account = request.query_params.get("account_id", "")
        draft = get_template(key).rule(
            FromTemplateIn(account_ids=[int(account)] if account.isdigit() else [])
        )
        values = _values_from_rule_in(draft)
    return await _editor(request, principal, session, rule_id=None, values=values, errors={})


@get("/ui/adrules/rules/{rule_id:int}")
async def edit_rule_page(
    request: AnyRequest,
    principal: CurrentPrincipal,
    session: Reads,
    rule_id: FromPath[int],
) -> Template:
    view = await rule_views.view_rule(session, workspace_id=principal.workspace_id, rule_id=rule_id)
    return await _editor(
        request,
        principal,
        session,
        rule_id=rule_id,
        values=_values_from_view(view),
        errors={},
        view=view,
    )


async def _save(
    request: AnyRequest,
    principal: Principal,
    uow: UnitOfWork,
    machinery: tuple[SecretBox, AddressGuard, Clock],
    rule_id: int | None,
) -> Template | Redirect:
    secrets, guard, clock = machinery
    form = await request.form()
    document, errors = form_to_rule(form)
    if not str(document["name"]).strip():
        # Reported here so the rest of the rule is still checked and every message shows at once.
        errors["name"] = "must not be blank"
        document["name"] = "untitled"
    try:
        data = parse_rule(document)
        try:
            check_rule(data)
        except ValidationFailed as exc:
            errors = {**_field_errors(exc), **errors}
        if not errors:
            async with uow.attempt():
                if rule_id is None:
                    rule = await rule_service.create_rule(
                        uow.session,
                        secrets,
                        guard,
                        workspace_id=principal.workspace_id,
                        data=data,
                        now=clock.now(),
                    )
                    rule_id = rule.id
                else:
                    await rule_service.update_rule(
                        uow.session,
                        secrets,
                        guard,
                        workspace_id=principal.workspace_id,
                        rule_id=rule_id,
                        data=data,
                        now=clock.now(),
                    )
            return Redirect(f"/ui/adrules/rules/{rule_id}?saved=1")
    except ValidationFailed as exc:
        errors = {**_field_errors(exc), **errors}
    return await _editor(
        request,
        principal,
        uow.session,
        rule_id=rule_id,
        values=_values_from_form(form),
        errors=errors,
    )


@post("/ui/adrules/rules")
async def create_rule(
    request: AnyRequest,
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
) -> Template | Redirect:
    return await _save(request, principal, uow, (secrets, guard, clock), None)


@post("/ui/adrules/rules/{rule_id:int}")
async def update_rule(
    request: AnyRequest,
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
    rule_id: FromPath[int],
) -> Template | Redirect:
    # 404 for another workspace's rule
    await rule_views.view_rule(uow.session, workspace_id=principal.workspace_id, rule_id=rule_id)
    return await _save(request, principal, uow, (secrets, guard, clock), rule_id)


# -- batch log ------------------------------------------------------------------------------------


@get("/ui/adrules/batches")
async def batches_page(
    request: AnyRequest, principal: CurrentPrincipal, session: Reads
) -> Template:
    raw = request.query_params.get("rule_id")
    rule_id = int(raw) if raw and raw.isdigit() else None
    rows = await rule_views.list_batches(
        session, workspace_id=principal.workspace_id, rule_id=rule_id, limit=200
    )
    return page(request, "adrules/batches.html", principal, rows=rows[:200], rule_id=rule_id)


ROUTES: list[Any] = [
    rules_page,
    change_stop,
    run_rule_now,
    new_rule_page,
    edit_rule_page,
    create_rule,
    update_rule,
    batches_page,
    *adrules_accounts.ROUTES,
    *adrules_log.ROUTES,
    *adrules_backtest.ROUTES,
]
"""Page handlers; they receive ``principal`` (signed-in person) and the request's dependencies
(:mod:`app.web.deps`)."""

PUBLIC_ROUTES: list[Any] = []
"""Handlers reachable without signing in (hosted forms, tracking, snippets)."""
