"""Errors a person can cause by typing read as the field's label and what it allows, never a
machine path or a library's wording (platform spec PL-16): every field of the rule builder —
schedule, conditions of each kind, tasks and their actions — is given a bad value and the
message the editor shows is checked."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from app.engines.adrules.validation import check_rule
from app.errors import ValidationFailed
from app.web.dashboard.adrules_rule_form import parse_rule, shown_errors
from app.web.plain_errors import plain_error

PATH_SYNTAX = re.compile(r"[\[\]]|[A-Za-z_]\w*\.[A-Za-z_]")
LIBRARY = ("Expected", "Invalid decimal string", "msgspec", "Object missing required field")

BASE: dict[str, Any] = {
    "name": "Guard",
    "schedule": {"mode": "interval", "minutes": 60},
    "tasks": [
        {
            "name": "t",
            "conditions": [
                {"type": "metric_value", "metric": "spend", "operator": "gt", "value": "10"}
            ],
            "action": {"type": "log_only"},
        }
    ],
}

METRIC_METRIC: dict[str, Any] = {
    "type": "metric_metric",
    "metric": "cpc",
    "operator": "gt",
    "other_metric": "cpc",
    "multiplier": "1.5",
}
CLOCK: dict[str, Any] = {"type": "clock", "hours": [9]}
SHEET: dict[str, Any] = {
    "type": "custom_metric",
    "spreadsheet_id": "abcdefghijkl",
    "sheet_name": "Sheet1",
    "lookup_column": "A",
    "value_column": "B",
    "operator": "gt",
    "value": "1",
}
TIMETABLE = {"mode": "timetable", "week": {"mon": ["09:00"]}}

# (where the bad value goes, the value, the label the form shows for it)
CASES: list[tuple[str, Any, Any, str]] = [
    # schedule
    ("schedule", "minutes", 0, "Run every"),
    ("schedule", "minutes", 10_081, "Run every"),
    ("schedule", "minutes", "often", "Run every"),
    ("schedule", "mode", "sometimes", "Mode"),
    ("schedule", "start_date", "31/12/2026", "Start date"),
    ("schedule", "end_date", "soon", "End date"),
    ("schedule", "timezone", "", "Time zone"),
    ("timetable", "mon", ["9 am"], "Monday"),
    ("timetable", "sun", "09:00", "Sunday"),
    # tasks
    ("task", "name", "x" * 201, "Task name"),
    ("task", "group", "xor", "Match"),
    ("task", "cooldown", "forever", "Cooldown"),
    ("task", "action", None, "Action"),
    # conditions, every kind
    ("condition", "type", "weather", "Condition"),
    ("condition", "metric", "luck", "Metric"),
    ("condition", "period", "someday", "Period"),
    ("condition", "operator", "about", "Is"),
    ("condition", "value", "ten", "Value"),
    ("metric_metric", "multiplier", "1,5", "Times"),
    ("metric_metric", "other_metric", "luck", "Other metric"),
    ("metric_metric", "other_period", "someday", "Its period"),
    ("clock", "hours", [24], "Hours"),
    ("clock", "hours", [], "Hours"),
    ("clock", "weekdays", ["funday"], "Weekdays"),
    ("custom_metric", "spreadsheet_id", "short", "Spreadsheet id"),
    ("custom_metric", "sheet_name", "", "Sheet"),
    ("custom_metric", "lookup_column", "a", "Campaign id column"),
    ("custom_metric", "value_column", "1", "Value column"),
    ("custom_metric", "value", "lots", "Value"),
    ("custom_metric", "locale", "German", "Sheet locale"),
    # actions, every field the builder offers
    ("action", "type", "explode", "Action"),
    ("increase_budget", "amount", "a lot", "Amount"),
    ("increase_budget", "by", "double", "Change by"),
    ("increase_budget", "max", "sky", "Never above"),
    ("decrease_budget", "min", "floor", "Never below"),
    ("rename", "template", "", "Name template"),
    ("append_to_name", "text", "", "Text"),
    ("append_to_name", "separator", "x" * 11, "Separator"),
    ("notify_email", "recipients", ["not-an-address"], "Recipients"),
    ("notify_email", "subject", "", "Subject"),
    ("notify_webhook", "url", "ftp://x", "Webhook URL"),
    ("notify_webhook", "secret", "short", "Signing secret"),
    ("set_bid", "strategy", "cheapest", "Ad sets bidding with"),
]

ACTIONS: dict[str, Any] = {
    "increase_budget": {"type": "increase_budget", "amount": "10", "max": "100"},
    "decrease_budget": {"type": "decrease_budget", "amount": "10", "min": "1"},
    "rename": {"type": "rename", "template": "{name} x"},
    "append_to_name": {"type": "append_to_name", "text": "x"},
    "notify_email": {"type": "notify_email", "recipients": ["a@example.com"], "subject": "s"},
    "notify_webhook": {"type": "notify_webhook", "url": "https://example.com/h"},
    "set_bid": {"type": "set_bid", "amount": "1"},
}


def bad_rule(where: str, key: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    task = doc["tasks"][0]
    condition = task["conditions"][0]
    if where == "schedule":
        doc["schedule"][key] = value
    elif where == "timetable":
        doc["schedule"] = copy.deepcopy(TIMETABLE)
        doc["schedule"]["week"][key] = value
    elif where == "task":
        if value is None:
            del task[key]
        else:
            task[key] = value
    elif where == "condition":
        condition[key] = value
    elif where in ("metric_metric", "clock", "custom_metric"):
        kind = {"metric_metric": METRIC_METRIC, "clock": CLOCK, "custom_metric": SHEET}[where]
        task["conditions"] = [{**copy.deepcopy(kind), key: value}]
    elif where == "action":
        task["action"][key] = value
    else:
        task["action"] = {**copy.deepcopy(ACTIONS[where]), key: value}
    return doc


def shown_for(document: dict[str, Any]) -> dict[str, str]:
    """What the rule editor shows for ``document``: its decode, then its own checks."""
    errors: dict[str, str] = {}
    try:
        check_rule(parse_rule(document))
    except ValidationFailed as exc:
        for detail in exc.details:
            errors.setdefault(str(detail.get("field", "")), str(detail.get("message", "")))
    return shown_errors(errors)


def assert_plain(message: str, label: str) -> None:
    assert not PATH_SYNTAX.search(message), message
    for wording in LIBRARY:
        assert wording not in message, message
    assert message.startswith(label), (label, message)


def test_the_base_rule_is_accepted() -> None:
    assert shown_for(BASE) == {}


@pytest.mark.parametrize(("where", "key", "value", "label"), CASES)
def test_every_builder_field_says_its_label_and_what_it_allows_pl16(
    where: str, key: str, value: Any, label: str
) -> None:
    shown = shown_for(bad_rule(where, key, value))
    assert shown, (where, key, value)
    for message in shown.values():
        assert_plain(message, label)


def test_the_issue_examples_read_plainly_pl16() -> None:
    [minutes] = shown_for(bad_rule("schedule", "minutes", 0)).values()
    assert minutes == "Run every: enter a whole number of minutes, 1 or more"
    [value] = shown_for(bad_rule("condition", "value", "ten")).values()
    assert value == "Value (task 1, condition 1): enter a number, like 12 or 1.5"


def test_the_builder_pins_a_missing_field_on_its_input_pl16() -> None:
    document = bad_rule("condition", "value", None)
    del document["tasks"][0]["conditions"][0]["value"]
    shown = shown_for(document)
    assert list(shown) == ["tasks[0].conditions[0].value"]
    assert shown["tasks[0].conditions[0].value"] == "Value (task 1, condition 1): fill this in"


def test_an_unlisted_path_is_spelled_out_not_shown_pl16() -> None:
    message = plain_error("settings.retry_after[2]", "Expected `int` >= 1")
    assert message == "Retry after (entry 3): enter a whole number, 1 or more"
