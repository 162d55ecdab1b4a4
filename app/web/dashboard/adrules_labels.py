"""The rule editor's labels for each field of a rule, as its form and builder show them: what
the one error policy (``app.web.plain_errors``) names a field by when it refuses a value."""

from __future__ import annotations

from app.web.plain_errors import FieldText, Label

_TIMES = "enter times like 09:00, 17:30 (hours 00 to 23)"
_DAYS = {
    "mon": "Monday",
    "tue": "Tuesday",
    "wed": "Wednesday",
    "thu": "Thursday",
    "fri": "Friday",
    "sat": "Saturday",
    "sun": "Sunday",
}

_CONDITION: dict[str, Label] = {
    "type": "Condition",
    "metric": "Metric",
    "period": "Period",
    "operator": "Is",
    "value": "Value",
    "multiplier": "Times",
    "other_metric": "Other metric",
    "other_period": "Its period",
    "hours": FieldText("Hours", unit="hours"),
    "weekdays": "Weekdays",
    "spreadsheet_id": "Spreadsheet id",
    "sheet_name": "Sheet",
    "lookup_column": "Campaign id column",
    "value_column": "Value column",
    "locale": "Sheet locale",
}

_ACTION: dict[str, Label] = {
    "type": "Action",
    "by": "Change by",
    "amount": "Amount",
    "max": "Never above",
    "min": "Never below",
    "template": "Name template",
    "text": "Text",
    "separator": "Separator",
    "recipients": "Recipients",
    "subject": "Subject",
    "url": "Webhook URL",
    "secret": "Signing secret",
    "strategy": "Ad sets bidding with",
}

RULE_LABELS: dict[str, Label] = {
    "form": "Rule",
    "name": "Name",
    "status": "Status",
    "level": "Level",
    "account_ids": "Ad accounts",
    "account_ids[]": "Ad accounts",
    "prefilters": "Filters",
    "prefilters.campaign_ids": FieldText("Campaign ids", shape="enter campaign ids of digits only"),
    "prefilters.campaign_ids[]": FieldText(
        "Campaign ids", shape="enter campaign ids of digits only"
    ),
    "prefilters.name_contains": "Name contains",
    "prefilters.effective_status": "Effective status",
    "prefilters.effective_status.operator": "Effective status",
    "prefilters.effective_status.values": "Effective status",
    "prefilters.effective_status.values[]": "Effective status",
    "schedule": "Schedule",
    "schedule.mode": "Mode",
    "schedule.minutes": FieldText("Run every", unit="minutes"),
    "schedule.week": FieldText("Weekly timetable", shape=_TIMES),
    **{f"schedule.week.{d}": FieldText(day, shape=_TIMES) for d, day in _DAYS.items()},
    **{f"schedule.week.{d}[]": FieldText(day, shape=_TIMES) for d, day in _DAYS.items()},
    "schedule.start_date": "Start date",
    "schedule.end_date": "End date",
    "schedule.timezone": "Time zone",
    "tasks": "Tasks",
    "tasks[]": "Task",
    "tasks[].id": "Task",
    "tasks[].name": "Task name",
    "tasks[].group": "Match",
    "tasks[].cooldown": "Cooldown",
    "tasks[].conditions": "Conditions",
    "tasks[].conditions[]": "Condition",
    **{f"tasks[].conditions[].{k}": v for k, v in _CONDITION.items()},
    "tasks[].conditions[].hours[]": FieldText("Hours", unit="hours"),
    "tasks[].conditions[].weekdays[]": "Weekdays",
    "tasks[].action": "Action",
    **{f"tasks[].action.{k}": v for k, v in _ACTION.items()},
    "tasks[].action.recipients[]": FieldText(
        "Recipients", shape="enter e-mail addresses, each with an @ and a domain"
    ),
    "attribution_windows": "Attribution windows",
    "attribution_windows[]": "Attribution windows",
    "approval": "Ask before acting",
    "approval.required": "Ask before acting",
    "approval.window_hours": FieldText("Approval window", unit="hours"),
}
