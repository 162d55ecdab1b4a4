"""The checks of what starts a funnel and of its settings: the names a trigger refers to exist,
a segment, date or schedule trigger is well formed, a filter sits only on a trigger with an event
to filter (FN-26), and the re-entry settings agree (FN-3).
"""

from __future__ import annotations

from app.engines.funnels.contacts.predicate_checks import event_filter_problems
from app.engines.funnels.definitions.graph import (
    EVENTLESS_TRIGGERS,
    ApiEvent,
    DateField,
    Definition,
    ListJoin,
    Schedule,
    SegmentEnter,
    TagAdded,
    Trigger,
)
from app.engines.funnels.definitions.problems import KnownNames, Problem, check_predicate
from app.scheduling.zones import is_known_zone


def trigger_problems(definition: Definition, known: KnownNames) -> list[Problem]:
    out = []
    for trigger in definition.triggers:
        if isinstance(trigger, TagAdded) and trigger.tag not in known.tags:
            out.append(
                Problem("FN-26", "reference", f"trigger: tag '{trigger.tag}' does not exist")
            )
        elif isinstance(trigger, ListJoin) and trigger.list not in known.lists:
            out.append(
                Problem("FN-26", "reference", f"trigger: list '{trigger.list}' does not exist")
            )
        elif isinstance(trigger, ApiEvent) and not trigger.event:
            out.append(Problem("FN-26", "required", "trigger: api_event needs an event name"))
        else:
            out += [Problem("FN-26", "trigger", f"trigger: {m}") for m in _timed(trigger, known)]
    return out


def trigger_filter_problems(definition: Definition) -> list[Problem]:
    """A trigger's filter tests the properties of the event it fires on; the triggers without
    an event take none. Problems name the trigger by its place in the list (1 = the first)."""
    out = []
    for number, trigger in enumerate(definition.triggers, start=1):
        if trigger.filter is None:
            continue
        kind = str(trigger.__struct_config__.tag)
        where = f"trigger {number} ({kind})"
        if kind in EVENTLESS_TRIGGERS:
            out.append(
                Problem(
                    "FN-26",
                    "filter",
                    f"{where}: starts without an event, so it has no event properties to filter "
                    "on; use the entry conditions instead",
                )
            )
            continue
        out += [
            Problem("FN-26", "filter", f"{where}: filter: {msg}")
            for msg in event_filter_problems(trigger.filter)
        ]
    return out


def settings_problems(definition: Definition) -> list[Problem]:
    settings = definition.settings
    if settings.reentry_days is not None and not settings.reentry:
        return [
            Problem(
                "FN-3",
                "settings",
                "settings: 'reentry_days' limits re-entry, which is off ('reentry': false)",
            )
        ]
    return []


def _timed(trigger: Trigger, known: KnownNames) -> list[str]:
    """Problems of the segment, date and schedule triggers."""
    if isinstance(trigger, SegmentEnter):
        return check_predicate(trigger.predicate, known)
    if isinstance(trigger, DateField):
        problems = []
        if known.fields.get(trigger.field) != "date":
            problems.append(f"date_field needs a custom field of type date, not '{trigger.field}'")
        if not (0 <= trigger.hour <= 23 and 0 <= trigger.minute <= 59):
            problems.append("date_field: hour 0-23 and minute 0-59")
        return problems
    if isinstance(trigger, Schedule):
        problems = [] if trigger.segment is None else check_predicate(trigger.segment, known)
        if not (0 <= trigger.hour <= 23 and 0 <= trigger.minute <= 59):
            problems.append("schedule: hour 0-23 and minute 0-59")
        if trigger.every_days < 1 or any(not 0 <= d <= 6 for d in trigger.weekdays):
            problems.append("schedule: every_days >= 1 and weekdays 0 (Monday) to 6")
        if not is_known_zone(trigger.timezone):
            problems.append(f"schedule: unknown time zone '{trigger.timezone}'")
        return problems
    return []
