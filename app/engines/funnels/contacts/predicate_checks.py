"""The rules a segment predicate must meet before it is stored or run: fields that exist,
operators that fit the field's type, values of that type, saved segments that exist, and an event
filter holding only ``event`` predicates (FN-10, FN-14).

The validator checks a funnel's predicates with these (:mod:`app.engines.funnels.definitions`),
and so do the segment and field forms; the language itself is :mod:`.segments`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from app.engines.funnels.contacts.segments import (
    EVENT_FILTER_KINDS,
    OPS_BY_TYPE,
    STANDARD_FIELDS,
    AllOf,
    AnyOf,
    ContextIs,
    EventCount,
    EventIs,
    FieldIs,
    FieldType,
    InSegment,
    Predicate,
    field_type,
    walk,
)


def problems(
    predicate: Predicate,
    custom: Mapping[str, str],
    path: str = "",
    *,
    allow_context: bool = False,
) -> list[str]:
    """Rule violations inside a predicate (unknown fields, operators that do not fit the type).
    ``allow_context``: the predicate is a condition's, evaluated inside a run (the validator
    checks its context paths against the graph)."""
    out: list[str] = []
    for p in walk(predicate):
        if isinstance(p, EventIs):
            out.append(
                f"{path}event property '{p.property}' exists only in a trigger's filter or a "
                "wait's event filter"
            )
        elif isinstance(p, ContextIs):
            if not allow_context:
                out.append(
                    f"{path}context '{p.path}' exists only inside a run: use it in a condition node"
                )
                continue
            # The path itself is checked against the graph by the validator.
            if p.op not in ("exists", "not_exists") and p.value is None:
                out.append(f"{path}operator '{p.op}' on '{p.path}' needs a value")
        elif isinstance(p, FieldIs):
            if p.field not in STANDARD_FIELDS and p.field not in custom:
                out.append(f"{path}unknown field '{p.field}'")
                continue
            kind = field_type(p.field, custom)
            if p.op not in OPS_BY_TYPE[kind]:
                out.append(f"{path}operator '{p.op}' does not apply to {kind} field '{p.field}'")
            elif p.op not in ("exists", "not_exists") and not _value_fits(kind, p.value):
                out.append(f"{path}value {p.value!r} is not a {kind} (field '{p.field}')")
        elif isinstance(p, EventCount) and (
            p.count < 0 or (p.within_days is not None and p.within_days <= 0)
        ):
            out.append(f"{path}event_count needs count >= 0 and within_days > 0")
        elif isinstance(p, AllOf | AnyOf) and not p.predicates:
            out.append(f"{path}'{type(p).__name__}' needs at least one predicate")
    return out + _unbound(predicate, path)


def _unbound(predicate: Predicate, path: str) -> list[str]:
    """References to saved segments that carry no conditions: the segment does not exist (in
    this workspace) — see :mod:`.saved_segments`."""
    missing = (p for p in walk(predicate) if isinstance(p, InSegment) and p.predicate is None)
    return [f"{path}saved segment {p.segment_id} does not exist" for p in missing]


def event_filter_problems(predicate: Predicate) -> list[str]:
    """Rule violations of an event filter: only ``event`` predicates (grouped with all / any /
    not), each with a well-formed property path and a value for its operator."""
    out: list[str] = []
    for p in walk(predicate):
        if not isinstance(p, EVENT_FILTER_KINDS):
            out.append(
                f"a filter tests the event's properties only, not '{kind_name(p)}': "
                "put conditions on the contact in the entry conditions"
            )
        elif isinstance(p, EventIs):
            parts = p.property.split(".")
            if any(not part.strip() for part in parts):
                out.append(
                    f"event property '{p.property}' needs a name, or names joined by dots "
                    "(e.g. 'plan' or 'customer.country')"
                )
            elif p.op not in ("exists", "not_exists") and p.value is None:
                out.append(f"operator '{p.op}' on event property '{p.property}' needs a value")
        elif isinstance(p, AllOf | AnyOf) and not p.predicates:
            out.append(f"'{type(p).__name__}' needs at least one predicate")
    return out


def kind_name(predicate: Predicate) -> str:
    return str(predicate.__struct_config__.tag)


def _value_fits(kind: FieldType, value: object) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "date":
        return isinstance(value, str) and _is_iso_date(value)
    return isinstance(value, str)


def _is_iso_date(value: str) -> bool:
    try:
        datetime.strptime(value, "%Y-%m-%d")  # noqa: DTZ007 - a calendar date, no time
    except ValueError:
        return False
    return True
