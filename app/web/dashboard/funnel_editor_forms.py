"""The visual funnel editor's vocabulary of steps and triggers: what each kind is called, the form
of its settings (labels and input types, so the canvas script renders forms without knowing the
graph's Python types), the ways out it draws, the fields a trigger cannot do without, and what a
message step needs from the contact.

Data only: :mod:`.funnel_editor` sends it to the canvas and words the validator's findings with it.
"""

from __future__ import annotations

from typing import Any

from app.engines.funnels.definitions.graph import EVENTLESS_TRIGGERS

KIND_LABELS: dict[str, str] = {
    "send_email": "Send email",
    "send_sms": "Send SMS",
    "send_push": "Send push",
    "send_letter": "Send letter",
    "notify_team": "Notify team",
    "add_tag": "Add tag",
    "remove_tag": "Remove tag",
    "add_to_list": "Add to list",
    "remove_from_list": "Remove from list",
    "set_field": "Set field",
    "http_request": "HTTP request",
    "create_payment": "Create payment",
    "book_slot": "Book slot",
    "enter_funnel": "Enter funnel",
    "exit_funnel": "Exit funnel",
    "ai_generate": "AI text",
    "wait": "Wait",
    "condition": "Condition",
    "split": "Split",
    "join": "Join",
    "goal": "Goal",
    "throttle": "Throttle",
    "quiet_hours": "Quiet hours",
}

# (field, label, input type). Types the script knows: text, textarea (with a variable picker on
# message kinds), int, optint (blank = not set), select:<a|b|c>, bool, tag, list, field,
# datefield, funnel, optfunnel, strings (comma-separated), headers (one "Name: value" a line),
# value (text, number, true/false), datetime, predicate, optpredicate, branches.
_MESSAGE = "textarea"
_BEST_HOUR = (
    "best_hour",
    "Send at the contact's best hour (from their past opens and clicks)",
    "bool",
)
FORMS: dict[str, list[tuple[str, str, str]]] = {
    "send_email": [
        ("subject", "Subject", "text"),
        ("body", "Body", _MESSAGE),
        ("html", "HTML body (optional)", _MESSAGE),
        _BEST_HOUR,
    ],
    "send_sms": [("text", "Text", _MESSAGE), _BEST_HOUR],
    "send_push": [("title", "Title", "text"), ("body", "Body", _MESSAGE), _BEST_HOUR],
    "send_letter": [("body", "Body", _MESSAGE), ("template", "Template", "text"), _BEST_HOUR],
    "notify_team": [
        ("to", "Recipients (comma-separated addresses)", "strings"),
        ("subject", "Subject", "text"),
        ("body", "Body", _MESSAGE),
    ],
    "add_tag": [("tag", "Tag", "tag")],
    "remove_tag": [("tag", "Tag", "tag")],
    "add_to_list": [("list", "List", "list")],
    "remove_from_list": [("list", "List", "list")],
    "set_field": [("field", "Field", "field"), ("value", "Value", "value")],
    "http_request": [
        ("url", "URL", "text"),
        ("method", "Method", "select:GET|POST|PUT|PATCH|DELETE"),
        ("headers", "Headers (one 'Name: value' a line)", "headers"),
        ("body", "Request body (optional)", _MESSAGE),
    ],
    "create_payment": [
        ("amount_minor", "Amount in cents", "int"),
        ("currency", "Currency (three letters)", "text"),
        ("description", "Description", "text"),
    ],
    "book_slot": [
        ("resource", "Resource", "text"),
        ("duration_minutes", "Duration in minutes", "int"),
    ],
    "enter_funnel": [("funnel_id", "Funnel", "funnel")],
    "exit_funnel": [("funnel_id", "Funnel to leave (blank: this one)", "optfunnel")],
    "ai_generate": [("prompt", "Prompt", _MESSAGE), ("variable", "Variable it fills", "text")],
    "wait": [
        ("days", "Days", "int"),
        ("hours", "Hours", "int"),
        ("minutes", "Minutes", "int"),
        (
            "until",
            "Or until (date and time with offset, e.g. 2027-01-31T09:00:00+00:00)",
            "datetime",
        ),
        (
            "weekday",
            "Or the next weekday",
            "optselect:0=Monday|1=Tuesday|2=Wednesday|3=Thursday|4=Friday|5=Saturday|6=Sunday",
        ),
        ("field", "Or a date field of the contact", "datefield"),
        ("offset_days", "Days after that date", "int"),
        ("hour", "At hour (contact's time)", "optint"),
        ("minute", "At minute", "int"),
        ("until_event", "End early on event", "text"),
        ("event_filter", "Only when that event's properties match", "opteventpredicate"),
    ],
    "condition": [("predicate", "Contacts who match", "predicate")],
    "split": [("branches", "Branches", "branches"), ("experiment", "Experiment", "experiment")],
    "join": [],
    "goal": [("predicate", "Contacts who match jump here (optional)", "optpredicate")],
    "throttle": [
        ("limit", "At most", "int"),
        ("period_seconds", "Per seconds", "int"),
        ("scope", "Counted per", "select:funnel|channel"),
        ("channel", "Channel", "select:email|sms|push|letter"),
    ],
    "quiet_hours": [("start_hour", "Hold from hour", "int"), ("end_hour", "Until hour", "int")],
}

TRIGGER_LABELS: dict[str, str] = {
    "manual": "Entered by hand or through the API",
    "contact_created": "A contact is created",
    "tag_added": "A tag is added",
    "list_join": "A contact joins a list",
    "api_event": "An event is sent",
    "form_submit": "A hosted form is submitted",
    "segment_enter": "A contact starts matching",
    "page_visit": "A page is visited",
    "message_opened": "A message is opened",
    "link_clicked": "A link is clicked",
    "booking_made": "A booking is made",
    "payment_made": "A payment is made",
    "date_field": "A date of the contact comes",
    "schedule": "On a schedule",
}
TRIGGER_FORMS: dict[str, list[tuple[str, str, str]]] = {
    "manual": [],
    "contact_created": [],
    "tag_added": [("tag", "Tag", "tag")],
    "list_join": [("list", "List", "list")],
    "api_event": [("event", "Event name", "text")],
    "form_submit": [("form", "Form's public id", "text")],
    "segment_enter": [("predicate", "Contacts who match", "predicate")],
    "page_visit": [("url_contains", "Address contains (blank: any page)", "text")],
    "message_opened": [("campaign_id", "Campaign number (blank: any)", "optint")],
    "link_clicked": [("url_contains", "Link contains (blank: any link)", "text")],
    "booking_made": [("resource", "Resource (blank: any)", "text")],
    "payment_made": [
        ("min_amount_minor", "At least (cents)", "int"),
        ("currency", "Currency (three letters, blank: any)", "text"),
    ],
    "date_field": [
        ("field", "Date field", "datefield"),
        ("offset_days", "Days after that date", "int"),
        ("hour", "At hour", "int"),
        ("minute", "At minute", "int"),
        ("yearly", "Every year", "bool"),
    ],
    "schedule": [
        ("hour", "At hour", "int"),
        ("minute", "At minute", "int"),
        ("every_days", "Every N days", "int"),
        ("timezone", "Time zone", "text"),
        ("segment", "Everyone who matches (optional)", "optpredicate"),
    ],
}
# Every trigger fired by an event can filter on the event's properties.
for _kind, _form in TRIGGER_FORMS.items():
    if _kind not in EVENTLESS_TRIGGERS:
        _form.append(("filter", "Only events whose properties match", "opteventpredicate"))

# Fields a trigger cannot do without (the script fills them when the trigger is added).
TRIGGER_REQUIRED: dict[str, dict[str, Any]] = {
    "tag_added": {"tag": ""},
    "list_join": {"list": ""},
    "api_event": {"event": ""},
    "form_submit": {"form": ""},
    "segment_enter": {"predicate": {"kind": "all", "predicates": []}},
    "date_field": {"field": ""},
}

# Outgoing edges each kind draws: (field, label). Split branches are drawn from the node's data.
PORTS: dict[str, list[tuple[str, str]]] = {
    "condition": [("yes", "Yes"), ("no", "No")],
    "split": [],
    "goal": [],
    "wait": [("next", "Then"), ("event_next", "On the event")],
}
LINEAR_PORTS = [("next", "Then")]
# Nodes whose effect can fail for good have a second way out (see effect_failures).
_FAILABLE = (
    "send_email",
    "send_sms",
    "send_push",
    "send_letter",
    "notify_team",
    "http_request",
    "create_payment",
    "book_slot",
    "ai_generate",
)
PORTS.update({kind: [*LINEAR_PORTS, ("on_failure", "If it cannot go out")] for kind in _FAILABLE})

_UNSENT = (
    " A contact without it gets nothing: the run takes 'If it cannot go out', or ends as failed."
)
HELP: dict[str, str] = {
    "send_email": "Goes to the contact's e-mail address." + _UNSENT,
    "send_sms": "Goes to the contact's phone number." + _UNSENT,
    "send_push": (
        "Goes to the device token in the contact's text field push_token (or the field the push "
        "provider names); the funnel cannot be published until that field exists." + _UNSENT
    ),
    "send_letter": (
        "Goes to the postal address in the contact's text fields address_line1, address_city, "
        "address_postal_code and address_country (ISO code), with address_line2 and "
        "address_state when present; the funnel cannot be published until those fields exist."
        + _UNSENT
    ),
}
"""What each message kind needs from the contact, shown in the step's panel."""
