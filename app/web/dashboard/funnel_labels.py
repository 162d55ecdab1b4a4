"""The funnel editor's step settings as a person reads them when one is refused: each setting's
label (the form's own, without its hint in brackets) and what it allows, for every kind of step.

One sentence per setting serves both sources of a refusal: the definition that does not decode
(``days: "two"``) and the validator's findings (``hour must be 0 to 23``); either reads
"Step 'Wait 2 days' — At hour: a whole hour from 0 to 23". A setting whose finding says something
specific (a condition's predicate, a split's branches) keeps the finding after its label: there
the finding is what is allowed."""

from __future__ import annotations

from app.web.plain_errors import FieldText

_FILL = "enter text; it cannot be empty"
_TEXT = "enter text, or leave it empty"
_TICK = "tick it or leave it unticked"
_HOUR = "a whole hour from 0 to 23"

COMMON: dict[str, tuple[str, str]] = {
    "id": (
        "Name",
        "letters, digits, _ and - (1 to 64), not the name of another step",
    ),
    "label": ("Label", "enter text"),
    "entry": ("Runs start here", _TICK),
    "kind": ("Step kind", "choose one of the kinds of step offered"),
    "next": ("Then", "choose a step of this funnel, or end the run"),
    "on_failure": ("If it cannot go out", "choose a step of this funnel, or end the run"),
    "transactional": ("Transactional", _TICK),
}
"""Settings every step (or every sending step) has: (label, what it allows)."""

ALLOWED: dict[str, dict[str, str]] = {
    "send_email": {
        "subject": _FILL,
        "body": "write the message (a body, or an HTML body)",
        "html": _TEXT,
        "best_hour": _TICK,
    },
    "send_sms": {"text": _FILL, "best_hour": _TICK},
    "send_push": {"title": _FILL, "body": _FILL, "best_hour": _TICK},
    "send_letter": {
        "body": "write a body, or name a template",
        "template": "name a template, or write a body",
        "best_hour": _TICK,
    },
    "notify_team": {
        "to": "enter at least one address, separated by commas",
        "subject": _FILL,
        "body": _FILL,
    },
    "add_tag": {"tag": "choose a tag that exists in this workspace"},
    "remove_tag": {"tag": "choose a tag that exists in this workspace"},
    "add_to_list": {"list": "choose a list that exists in this workspace"},
    "remove_from_list": {"list": "choose a list that exists in this workspace"},
    "set_field": {
        "field": "choose a field of this workspace",
        "value": "enter a value of the field's type (text, a number, or true or false)",
    },
    "http_request": {
        "url": "enter an address starting with http:// or https://",
        "method": "choose GET, POST, PUT, PATCH or DELETE",
        "headers": "enter one 'Name: value' a line",
        "body": _TEXT,
    },
    "create_payment": {
        "amount_minor": "a whole number of cents, 1 or more",
        "currency": "three letters, like EUR",
        "description": "enter text",
    },
    "book_slot": {"resource": _FILL, "duration_minutes": "a whole number of minutes, 1 or more"},
    "enter_funnel": {"funnel_id": "choose a funnel of this workspace"},
    "exit_funnel": {"funnel_id": "choose a funnel of this workspace, or leave it empty"},
    "ai_generate": {"prompt": _FILL, "variable": "enter a name, like summary; it cannot be empty"},
    "wait": {
        "days": (
            "a whole number of days, 0 or more; a wait takes one of a duration, a date and "
            "time, a weekday or a date field"
        ),
        "hours": "a whole number of hours, 0 or more",
        "minutes": "a whole number of minutes, 0 or more",
        "until": "a date and time with its offset, like 2027-01-31T09:00:00+00:00",
        "weekday": "choose a weekday, Monday to Sunday",
        "field": "choose a date field of this workspace",
        "offset_days": "a whole number of days (negative: before the date)",
        "hour": _HOUR + " (needed with a weekday or a date field)",
        "minute": "a whole number from 0 to 59",
        "until_event": "the name of the event that ends the wait early",
    },
    "throttle": {
        "limit": "a whole number, 1 or more",
        "period_seconds": "a whole number of seconds, 1 or more",
        "scope": "choose funnel or channel",
        "channel": "choose email, sms, push or letter",
    },
    "quiet_hours": {
        "start_hour": _HOUR + ", not the same as Until hour",
        "end_hour": _HOUR + ", not the same as Hold from hour",
    },
}
"""Per kind of step, what each of its settings allows."""

SPECIFIC = frozenset({"predicate", "event_filter", "branches", "experiment"})
"""Settings whose finding is itself what is allowed (``unknown tag 'vip'``)."""


def short(label: str) -> str:
    """The form's label without its hint: "Currency (three letters)" reads "Currency"."""
    return label.split(" (", 1)[0].strip()


def step_field(kind: str | None, name: str, form_label: str | None) -> FieldText:
    """How a setting of a step of ``kind`` is named when refused; ``form_label`` is the label
    the editor's form shows (None: not on the form)."""
    if form_label is None and name in COMMON:
        return FieldText(COMMON[name][0])
    label = short(form_label) if form_label else name.replace("_", " ").capitalize()
    return FieldText(label)


def allowed(kind: str | None, name: str) -> str | None:
    """What the setting allows, said plainly (None: unknown here; the refusal's own words are
    turned into a sentence instead)."""
    if name in COMMON and name not in ALLOWED.get(kind or "", {}):
        return COMMON[name][1]
    return ALLOWED.get(kind or "", {}).get(name)
