"""The ad rule editor's form: a posted form read into the rule document the JSON API takes, a
rule (saved, or a template not saved yet) shown as the form's values, and the validation errors
placed beside the inputs that show them, said by the one error policy."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar.datastructures import FormMultiDict

from app.engines.adrules import rule_tasks, rule_views
from app.engines.adrules.catalogue import (
    COOLDOWN_LABELS,
    METRICS,
    OPERATOR_SYMBOLS,
    PERIODS,
    WEEKDAYS,
)
from app.engines.adrules.documents import load_prefilters, load_schedule
from app.engines.adrules.schemas import RuleIn, TimetableSchedule
from app.errors import ValidationFailed
from app.web.dashboard.adrules_labels import RULE_LABELS
from app.web.plain_errors import plain_error, split_path

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


def pretty(value: Any) -> str:
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


def field_errors(exc: ValidationFailed) -> dict[str, str]:
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


def values_from_view(view: rule_views.RuleView) -> dict[str, Any]:
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
        "tasks_json": pretty(tasks),
        **_attribution_values(rule.attribution_windows),
        **_approval_values(rule.approval),
    }


def values_from_rule_in(rule: RuleIn) -> dict[str, Any]:
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
        "tasks_json": pretty(msgspec.to_builtins(rule.tasks)),
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


def values_from_form(form: FormMultiDict) -> dict[str, Any]:
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
