"""The checks of each node on its own: every send has its creative (FN-24); branches, weights,
references and each action's required settings (FN-26); a wait's one mode and its hours.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.engines.funnels.contacts.channel_fields import undefined_fields
from app.engines.funnels.contacts.predicate_checks import event_filter_problems
from app.engines.funnels.contacts.segments import STANDARD_FIELDS
from app.engines.funnels.definitions.graph import (
    AddTag,
    AddToList,
    AiGenerate,
    BookSlot,
    Condition,
    CreatePayment,
    EnterFunnel,
    ExitFunnel,
    Goal,
    HttpRequest,
    Node,
    NotifyTeam,
    QuietHours,
    RemoveFromList,
    RemoveTag,
    SendEmail,
    SendLetter,
    SendPush,
    SendSms,
    SetField,
    Split,
    Throttle,
    Wait,
    kind_of,
)
from app.engines.funnels.definitions.problems import KnownNames, Problem, check_predicate

THROTTLE_CHANNELS = ("email", "sms", "push", "letter")
"""The channels a per-channel throttle can count."""


def _missing(node: Node, rule: str, *names: str) -> list[Problem]:
    out = []
    for name in names:
        value = getattr(node, name)
        if value is None or (isinstance(value, str | list) and not value) or value == "":
            out.append(
                Problem(
                    rule, "required", f"{kind_of(node)} needs a non-empty '{name}'", node.id, name
                )
            )
    return out


def creative_problems(node: Node) -> list[Problem]:
    """FN-24: every send has its creative, per channel."""
    if isinstance(node, SendEmail):
        out = _missing(node, "FN-24", "subject")
        if not node.body.strip() and not (node.html or "").strip():
            out.append(
                Problem("FN-24", "required", "send_email needs a non-empty body", node.id, "body")
            )
        return out
    if isinstance(node, SendSms):
        return _missing(node, "FN-24", "text")
    if isinstance(node, SendPush):
        return _missing(node, "FN-24", "title", "body")
    if isinstance(node, SendLetter):
        if not node.body.strip() and not node.template.strip():
            return [
                Problem(
                    "FN-24", "required", "send_letter needs a body or a template", node.id, "body"
                )
            ]
        return []
    if isinstance(node, NotifyTeam):
        return _missing(node, "FN-24", "to", "subject", "body")
    return []


Bad = Callable[..., None]
"""Records one FN-26 problem (a code, a message and the setting it is about, if one) on the node
being checked."""


def node_problems(node: Node, known: KnownNames) -> list[Problem]:
    """FN-26: branches, weights, references and each action's required fields."""
    out: list[Problem] = []

    def bad(code: str, message: str, field: str | None = None) -> None:
        out.append(Problem("FN-26", code, message, node.id, field))

    for kinds, check in _NODE_CHECKS:
        if isinstance(node, kinds):
            out += check(node, known, bad)
            break
    return out


def _condition_rules(node: Condition, known: KnownNames, bad: Bad) -> list[Problem]:
    if not node.yes or not node.no:
        bad("branches", "a condition needs both a 'yes' and a 'no' branch")
    for msg in check_predicate(node.predicate, known, allow_context=True):
        bad("predicate", msg, "predicate")
    return []


def _split_rules(node: Split, known: KnownNames, bad: Bad) -> list[Problem]:
    if len(node.branches) < 2:
        bad("branches", "a split needs at least two branches", "branches")
    names = [b.name for b in node.branches]
    if len(set(names)) != len(names):
        bad("branches", "split branch names must be distinct", "branches")
    for branch in node.branches:
        if branch.weight <= 0:
            bad(
                "weight",
                f"branch '{branch.name}' has weight {branch.weight}; must be > 0",
                "branches",
            )
        if not branch.next:
            bad("branches", f"branch '{branch.name}' leads nowhere", "branches")
    return []


def _goal_rules(node: Goal, known: KnownNames, bad: Bad) -> list[Problem]:
    if node.predicate is not None:
        for msg in check_predicate(node.predicate, known):
            bad("predicate", msg, "predicate")
    return []


def _tag_rules(node: AddTag | RemoveTag, known: KnownNames, bad: Bad) -> list[Problem]:
    if not node.tag:
        bad("required", f"{kind_of(node)} needs a tag", "tag")
    elif node.tag not in known.tags:
        bad("reference", f"tag '{node.tag}' does not exist in this workspace", "tag")
    return []


def _list_rules(node: AddToList | RemoveFromList, known: KnownNames, bad: Bad) -> list[Problem]:
    if not node.list:
        bad("required", f"{kind_of(node)} needs a list", "list")
    elif node.list not in known.lists:
        bad("reference", f"list '{node.list}' does not exist in this workspace", "list")
    return []


def _set_field_rules(node: SetField, known: KnownNames, bad: Bad) -> list[Problem]:
    if not node.field:
        bad("required", "set_field needs a field", "field")
    elif node.field not in known.fields and node.field not in STANDARD_FIELDS:
        bad("reference", f"field '{node.field}' does not exist in this workspace", "field")
    else:
        kind = known.fields.get(node.field, "text")
        if node.value is not None and not _fits(kind, node.value):
            bad("value", f"value {node.value!r} is not a {kind}", "value")
    return []


def _funnel_ref_rules(node: EnterFunnel | ExitFunnel, known: KnownNames, bad: Bad) -> list[Problem]:
    # Leaving names a funnel only optionally (none: the one the run is in).
    if node.funnel_id is not None and node.funnel_id not in known.funnels:
        bad("reference", f"funnel {node.funnel_id} does not exist in this workspace", "funnel_id")
    return []


def _throttle_rules(node: Throttle, known: KnownNames, bad: Bad) -> list[Problem]:
    if node.limit <= 0:
        bad("throttle", "a throttle needs limit > 0", "limit")
    if node.period_seconds <= 0:
        bad("throttle", "a throttle needs period_seconds > 0", "period_seconds")
    if node.channel not in THROTTLE_CHANNELS:
        bad("throttle", f"a throttle counts one of {', '.join(THROTTLE_CHANNELS)}", "channel")
    return []


def _quiet_hours_rules(node: QuietHours, known: KnownNames, bad: Bad) -> list[Problem]:
    for name in ("start_hour", "end_hour"):
        if not 0 <= getattr(node, name) <= 23:
            bad("hours", "quiet hours are hours of the day, 0 to 23", name)
    if node.start_hour == node.end_hour:
        bad("hours", "quiet hours need different start and end hours", "end_hour")
    return []


def _http_rules(node: HttpRequest, known: KnownNames, bad: Bad) -> list[Problem]:
    if not node.url.startswith(("http://", "https://")):
        bad("required", "http_request needs an http(s) URL", "url")
    return []


def _payment_rules(node: CreatePayment, known: KnownNames, bad: Bad) -> list[Problem]:
    if node.amount_minor <= 0:
        bad("required", "create_payment needs a positive amount_minor", "amount_minor")
    if not re.fullmatch(r"[A-Za-z]{3}", node.currency):
        bad("required", "create_payment needs a three-letter currency code", "currency")
    return []


def _booking_rules(node: BookSlot, known: KnownNames, bad: Bad) -> list[Problem]:
    out = _missing(node, "FN-26", "resource")
    if node.duration_minutes <= 0:
        bad("required", "book_slot needs a positive duration_minutes", "duration_minutes")
    return out


def _ai_rules(node: AiGenerate, known: KnownNames, bad: Bad) -> list[Problem]:
    return _missing(node, "FN-26", "prompt", "variable")


def _channel_field_rules(node: SendPush | SendLetter, known: KnownNames, bad: Bad) -> list[Problem]:
    lacking = undefined_fields(kind_of(node), known.fields, push_token_field=known.push_token_field)
    if lacking:
        quoted = ", ".join(f"'{name}'" for name in lacking)
        bad(
            "channel_field",
            f"{kind_of(node)} reads the contact's {quoted}: define "
            f"{'it' if len(lacking) == 1 else 'them'} as text fields of this workspace "
            "first, or no contact can receive it",
        )
    return []


def _wait_node_rules(node: Wait, known: KnownNames, bad: Bad) -> list[Problem]:
    return _wait_rules(node, known)


_NODE_CHECKS: tuple[tuple[Any, Callable[[Any, KnownNames, Bad], list[Problem]]], ...] = (
    (Condition, _condition_rules),
    (Split, _split_rules),
    (Goal, _goal_rules),
    (Wait, _wait_node_rules),
    (AddTag | RemoveTag, _tag_rules),
    (AddToList | RemoveFromList, _list_rules),
    (SetField, _set_field_rules),
    (EnterFunnel | ExitFunnel, _funnel_ref_rules),
    (Throttle, _throttle_rules),
    (QuietHours, _quiet_hours_rules),
    (HttpRequest, _http_rules),
    (CreatePayment, _payment_rules),
    (BookSlot, _booking_rules),
    (AiGenerate, _ai_rules),
    (SendPush | SendLetter, _channel_field_rules),
)
"""Each node kind's own checks, the first matching entry applying."""


def _fits(kind: str, value: object) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return isinstance(value, str)


def _wait_rules(node: Wait, known: KnownNames) -> list[Problem]:
    out = []
    modes = [
        bool(node.days or node.hours or node.minutes),
        node.until is not None,
        node.weekday is not None,
        node.field is not None,
    ]
    if sum(modes) != 1:
        out.append(
            Problem(
                "FN-26",
                "wait_mode",
                "a wait takes exactly one of: a duration, 'until', 'weekday', or a date 'field'",
                node.id,
                "days",
            )
        )
    for name in ("days", "hours", "minutes"):
        if getattr(node, name) < 0:
            out.append(Problem("FN-26", "wait_mode", "durations cannot be negative", node.id, name))
    if node.hour is not None and not 0 <= node.hour <= 23:
        out.append(Problem("FN-26", "hours", "hour must be 0 to 23", node.id, "hour"))
    if not 0 <= node.minute <= 59:
        out.append(Problem("FN-26", "hours", "minute must be 0 to 59", node.id, "minute"))
    if (node.weekday is not None or node.field is not None) and node.hour is None:
        out.append(
            Problem(
                "FN-26", "hours", "weekday and date-field waits need an 'hour'", node.id, "hour"
            )
        )
    if node.weekday is not None and not 0 <= node.weekday <= 6:
        out.append(
            Problem("FN-26", "wait_mode", "weekday must be 0 (Monday) to 6", node.id, "weekday")
        )
    if node.field is not None and known.fields.get(node.field) != "date":
        out.append(
            Problem(
                "FN-26",
                "reference",
                f"field '{node.field}' is not a date field of this workspace",
                node.id,
                "field",
            )
        )
    if node.until is not None and node.until.tzinfo is None:
        out.append(
            Problem("FN-26", "wait_mode", "'until' needs a time zone offset", node.id, "until")
        )
    if node.event_filter is not None:
        if not node.until_event:
            out.append(
                Problem(
                    "FN-14",
                    "filter",
                    "an event filter needs the event that ends the wait early ('until_event')",
                    node.id,
                    "until_event",
                )
            )
        out += [
            Problem("FN-14", "filter", f"event filter: {msg}", node.id, "event_filter")
            for msg in event_filter_problems(node.event_filter)
        ]
    return out
