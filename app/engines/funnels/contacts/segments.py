"""The segment predicate language (FN-10): one definition, two evaluators.

A predicate is a msgspec tagged union over contact attributes, custom fields, tags, lists and event
history (counts within a time window), combined with ``all`` / ``any`` / ``not``. The same language
filters one event by its properties (``event`` predicates, in a trigger's ``filter`` and a wait's
``event_filter``). It compiles to a
SQL boolean expression for membership queries over many contacts, and evaluates in Python for one
contact whose facts are already loaded (conditions and goals in the runner). The two must agree;
a property test holds them to it.

Both evaluators use two-valued logic: a comparison with a missing value is false (never SQL's
unknown), so ``not`` means the same thing on both sides.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, cast

import msgspec
from sqlalchemy import (
    ColumnElement,
    and_,
    exists,
    false,
    func,
    not_,
    or_,
    select,
    true,
)

from app.db.functions import position
from app.db.tenancy import scoped_select
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
    ContactList,
    ContactTag,
    ListMember,
    Tag,
)
from app.engines.funnels.runs.work.context import MISSING, lookup
from app.engines.funnels.runs.work.context import compare as compare_context
from app.schemas import Count, Int64, Key, Name, Text

FieldType = Literal["text", "number", "date", "boolean"]
FIELD_TYPES: tuple[FieldType, ...] = ("text", "number", "date", "boolean")

STANDARD_FIELDS: dict[str, FieldType] = {
    "email": "text",
    "phone": "text",
    "first_name": "text",
    "last_name": "text",
    "timezone": "text",
}
"""Contact attributes held in columns; everything else is a custom field."""

CompareOp = Literal["eq", "ne", "gt", "gte", "lt", "lte", "contains", "exists", "not_exists"]
CountOp = Literal["eq", "gt", "gte", "lt", "lte"]

OPS_BY_TYPE: dict[FieldType, frozenset[str]] = {
    "text": frozenset({"eq", "ne", "contains", "exists", "not_exists"}),
    "number": frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "exists", "not_exists"}),
    # ISO dates (YYYY-MM-DD) order the same as strings in every collation.
    "date": frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "exists", "not_exists"}),
    "boolean": frozenset({"eq", "ne", "exists", "not_exists"}),
}


class _Predicate(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True):
    pass


class FieldIs(_Predicate, tag="field"):
    """Compare a contact attribute or custom field with a value."""

    field: Key
    op: CompareOp
    value: Text | Int64 | float | bool | None = None


class HasTag(_Predicate, tag="has_tag"):
    tag: Name


class InList(_Predicate, tag="in_list"):
    list: Name


class EventCount(_Predicate, tag="event_count"):
    """How many events named ``event`` the contact has (within the last ``within_days``)."""

    event: Name
    op: CountOp = "gte"
    count: Count = 1
    within_days: Count | None = None


class ContextIs(_Predicate, tag="context"):
    """Compare a value the run produced (``http.<node>.data.plan``, ``vars.<name>``…; see
    :mod:`app.engines.funnels.runs.work.context`). Only a condition node inside a run has a context:
    outside one, every comparison is false except ``not_exists`` (the same on both evaluators)."""

    path: Text
    op: CompareOp
    value: Text | Int64 | float | bool | None = None


class EventIs(_Predicate, tag="event"):
    """Compare a property of the event being filtered: the one a trigger fires on (a trigger's
    ``filter``) or the one that would end a wait early (a wait's ``event_filter``). ``property``
    is a dotted path into the event's properties (``plan``, ``amount_minor``,
    ``customer.country``, ``items.0.sku``); values compare as in :mod:`run_context` (numbers as
    numbers, strings as strings). Outside such a filter there is no event: every comparison is
    false except ``not_exists`` (the same on both evaluators)."""

    property: Key
    op: CompareOp
    value: Text | Int64 | float | bool | None = None


class AllOf(_Predicate, tag="all"):
    predicates: Annotated[list[Predicate], msgspec.Meta(max_length=100)]


class AnyOf(_Predicate, tag="any"):
    predicates: Annotated[list[Predicate], msgspec.Meta(max_length=100)]


class Not(_Predicate, tag="not"):
    predicate: Predicate


class InSegment(_Predicate, tag="segment"):
    """Matches a saved segment (FN-74). ``predicate`` is the segment's conditions, filled in from
    the saved segment when the campaign or funnel holding this reference is saved (see
    :mod:`.saved_segments`), so both evaluators stay free of database reads; an unfilled
    reference (the segment does not exist) matches nobody and is a problem to the validator."""

    segment_id: Int64
    predicate: Predicate | None = None


Predicate = (
    FieldIs | HasTag | InList | EventCount | ContextIs | EventIs | AllOf | AnyOf | Not | InSegment
)

EVENT_FILTER_KINDS = (EventIs, AllOf, AnyOf, Not)
"""What an event filter may hold: the event's properties, grouped. Conditions on the contact
belong in the funnel's entry predicate (checked at the door with the contact's facts)."""


_NO_TIME = datetime.fromtimestamp(0, UTC)
"""The ``now`` of an event filter's evaluation: nothing in a filter reads it."""


@dataclass(frozen=True, slots=True)
class ContactFacts:
    """Everything a predicate may look at, for one contact."""

    attributes: Mapping[str, Any]
    fields: Mapping[str, Any]
    tags: frozenset[str] = frozenset()
    lists: frozenset[str] = frozenset()
    events: tuple[tuple[str, datetime], ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)
    """The run's context, when the predicate is evaluated inside a run (condition nodes)."""
    event: Mapping[str, Any] | None = None
    """The properties of the event being filtered (trigger and wait filters)."""

    def in_run(self, context: Mapping[str, Any]) -> ContactFacts:
        """These facts inside a run with this context (what ``dataclasses.replace`` would make,
        without its look at the fields on every call: a condition node asks once a run)."""
        return ContactFacts(
            attributes=self.attributes,
            fields=self.fields,
            tags=self.tags,
            lists=self.lists,
            events=self.events,
            context=context,
            event=self.event,
        )


@dataclass(frozen=True, slots=True)
class References:
    """Names a predicate refers to (checked against the workspace by the validator)."""

    fields: set[str] = field(default_factory=set)
    tags: set[str] = field(default_factory=set)
    lists: set[str] = field(default_factory=set)


def walk(predicate: Predicate) -> Iterable[Predicate]:
    yield predicate
    if isinstance(predicate, AllOf | AnyOf):
        for child in predicate.predicates:
            yield from walk(child)
    elif isinstance(predicate, Not | InSegment) and predicate.predicate is not None:
        yield from walk(predicate.predicate)


def references(predicate: Predicate) -> References:
    refs = References()
    for p in walk(predicate):
        if isinstance(p, FieldIs):
            refs.fields.add(p.field)
        elif isinstance(p, HasTag):
            refs.tags.add(p.tag)
        elif isinstance(p, InList):
            refs.lists.add(p.list)
    return refs


def max_event_window(predicate: Predicate) -> tuple[set[str], int | None]:
    """Event names a predicate counts, and the widest window (None: all history)."""
    names: set[str] = set()
    widest: int | None = 0
    for p in walk(predicate):
        if isinstance(p, EventCount):
            names.add(p.event)
            widest = None if p.within_days is None or widest is None else max(widest, p.within_days)
    return names, widest


@dataclass(frozen=True, slots=True)
class FactsWanted:
    """What some predicates read of a contact besides its own row: whether its tags, whether
    its lists, and which of its events since how many days ago (``None``: all of its history).
    Facts loaded for them may leave out the rest: no predicate among them looks at it."""

    tags: bool = False
    lists: bool = False
    event_names: frozenset[str] = frozenset()
    within_days: int | None = 0
    field_types: bool = False
    """Whether a predicate compares a custom field, whose type the workspace defines (a
    standard attribute's type is fixed)."""

    def __or__(self, other: FactsWanted) -> FactsWanted:
        days = self.within_days
        days = None if days is None or other.within_days is None else max(days, other.within_days)
        return FactsWanted(
            self.tags or other.tags,
            self.lists or other.lists,
            self.event_names | other.event_names,
            days,
            self.field_types or other.field_types,
        )


def facts_wanted(predicates: Iterable[Predicate]) -> FactsWanted:
    wanted = FactsWanted()
    for predicate in predicates:
        names, days = max_event_window(predicate)
        wanted |= FactsWanted(
            tags=any(isinstance(p, HasTag) for p in walk(predicate)),
            lists=any(isinstance(p, InList) for p in walk(predicate)),
            event_names=frozenset(names),
            within_days=days,
            field_types=any(
                isinstance(p, FieldIs) and p.field not in STANDARD_FIELDS for p in walk(predicate)
            ),
        )
    return wanted


def field_type(name: str, custom: Mapping[str, str]) -> FieldType:
    if name in STANDARD_FIELDS:
        return STANDARD_FIELDS[name]
    kind = custom.get(name, "text")
    return kind if kind in FIELD_TYPES else "text"


def event_matches(predicate: Predicate, properties: Mapping[str, Any]) -> bool:
    """Does an event with these properties pass this filter? A filter holds only what
    :func:`~.predicate_checks.event_filter_problems` admits (the validator sees to it), none of
    which depends on the time or the contact: :func:`evaluate` with no contact facts."""
    facts = ContactFacts(attributes={}, fields={}, event=properties)
    return evaluate(predicate, facts, now=_NO_TIME, custom={})


# -- Python evaluation -------------------------------------------------------------------------


_PY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


def _compare(op: str, left: Any, right: Any) -> bool:
    return bool(_PY_OPS[op](left, right))


def _python_value(kind: FieldType, raw: Any) -> Any:
    if raw is None:
        return None
    if kind == "number":
        return float(raw)
    if kind == "boolean":
        return bool(raw)
    return str(raw)


def evaluate(
    predicate: Predicate, facts: ContactFacts, *, now: datetime, custom: Mapping[str, str]
) -> bool:
    """Does this one contact match ``predicate`` at ``now``?"""
    if isinstance(predicate, AllOf):
        return all(evaluate(p, facts, now=now, custom=custom) for p in predicate.predicates)
    if isinstance(predicate, AnyOf):
        return any(evaluate(p, facts, now=now, custom=custom) for p in predicate.predicates)
    if isinstance(predicate, Not):
        return not evaluate(predicate.predicate, facts, now=now, custom=custom)
    if isinstance(predicate, InSegment):
        inner = predicate.predicate
        return inner is not None and evaluate(inner, facts, now=now, custom=custom)
    if isinstance(predicate, HasTag):
        return predicate.tag in facts.tags
    if isinstance(predicate, InList):
        return predicate.list in facts.lists
    if isinstance(predicate, ContextIs):
        return compare_context(predicate.op, lookup(facts.context, predicate.path), predicate.value)
    if isinstance(predicate, EventIs):
        actual = lookup(facts.event, predicate.property) if facts.event is not None else MISSING
        return compare_context(predicate.op, actual, predicate.value)
    if isinstance(predicate, EventCount):
        return _event_count_matches(predicate, facts, now)
    return _field_matches(predicate, facts, custom)


def window_start(now: datetime, within_days: int | None) -> datetime | None:
    """Where an ``event_count`` window starts; ``None`` (every event counts) without a window, or
    for one reaching back before the first day a date can hold (no event is older than that)."""
    if not within_days:
        return None
    try:
        return now - timedelta(days=within_days)
    except OverflowError:
        return None


def _event_count_matches(predicate: EventCount, facts: ContactFacts, now: datetime) -> bool:
    since = window_start(now, predicate.within_days)
    n = sum(
        1 for name, at in facts.events if name == predicate.event and (since is None or at >= since)
    )
    return _compare(predicate.op, n, predicate.count)


def _field_matches(predicate: FieldIs, facts: ContactFacts, custom: Mapping[str, str]) -> bool:
    """A comparison of a standard attribute or a custom field (absent values match only
    ``not_exists``)."""
    kind = field_type(predicate.field, custom)
    source = facts.attributes if predicate.field in STANDARD_FIELDS else facts.fields
    value = _python_value(kind, source.get(predicate.field))
    if predicate.op == "exists":
        return value is not None
    if predicate.op == "not_exists":
        return value is None
    if value is None:
        return False
    if predicate.op == "contains":
        return str(predicate.value) in str(value)
    return _compare(predicate.op, value, _python_value(kind, predicate.value))


# -- SQL compilation ---------------------------------------------------------------------------


def _sql_value(kind: FieldType, name: str) -> ColumnElement[Any]:
    if name in STANDARD_FIELDS:
        column: ColumnElement[Any] = getattr(Contact, name)
        return column
    element = Contact.fields[name]
    if kind == "number":
        return cast("ColumnElement[Any]", element.as_float())
    if kind == "boolean":
        return cast("ColumnElement[Any]", element.as_boolean())
    return cast("ColumnElement[Any]", element.as_string())


def _sql_compare(op: str, left: ColumnElement[Any], right: Any) -> ColumnElement[bool]:
    # The same operator table as Python's: SQLAlchemy overloads these operators.
    return cast("ColumnElement[bool]", _PY_OPS[op](left, right))


def compile_sql(
    predicate: Predicate, *, workspace_id: int, now: datetime, custom: Mapping[str, str]
) -> ColumnElement[bool]:
    """A boolean SQL expression over ``contacts`` that is true exactly when :func:`evaluate` is."""
    if isinstance(predicate, AllOf):
        parts = [
            compile_sql(p, workspace_id=workspace_id, now=now, custom=custom)
            for p in predicate.predicates
        ]
        return and_(true(), *parts)
    if isinstance(predicate, AnyOf):
        parts = [
            compile_sql(p, workspace_id=workspace_id, now=now, custom=custom)
            for p in predicate.predicates
        ]
        return or_(false(), *parts)
    if isinstance(predicate, Not):
        return not_(
            compile_sql(predicate.predicate, workspace_id=workspace_id, now=now, custom=custom)
        )
    if isinstance(predicate, InSegment):
        return _compile_segment(predicate, workspace_id=workspace_id, now=now, custom=custom)
    if isinstance(predicate, HasTag):
        return exists(
            scoped_select(Tag, workspace_id, ContactTag.contact_id)
            .join(Tag, Tag.id == ContactTag.tag_id)
            .where(ContactTag.contact_id == Contact.id, Tag.name == predicate.tag)
        )
    if isinstance(predicate, InList):
        return exists(
            scoped_select(ContactList, workspace_id, ListMember.contact_id)
            .join(ContactList, ContactList.id == ListMember.list_id)
            .where(ListMember.contact_id == Contact.id, ContactList.name == predicate.list)
        )
    if isinstance(predicate, ContextIs | EventIs):
        # A contact outside a run has no context, and no event is being filtered: only
        # "not_exists" holds (as in evaluate).
        return true() if predicate.op == "not_exists" else false()
    if isinstance(predicate, EventCount):
        return _compile_event_count(predicate, now)
    kind = field_type(predicate.field, custom)
    value = _sql_value(kind, predicate.field)
    if predicate.op == "exists":
        return value.is_not(None)
    if predicate.op == "not_exists":
        return value.is_(None)
    if predicate.op == "contains":
        return and_(value.is_not(None), position(value, str(predicate.value)) > 0)
    right = _python_value(kind, predicate.value)
    # "x IS NOT NULL AND x op v" is false (not unknown) for a missing value: two-valued logic.
    return and_(value.is_not(None), _sql_compare(predicate.op, value, right))


def _compile_event_count(predicate: EventCount, now: datetime) -> ColumnElement[bool]:
    conditions = [ContactEvent.contact_id == Contact.id, ContactEvent.name == predicate.event]
    if (since := window_start(now, predicate.within_days)) is not None:
        conditions.append(ContactEvent.occurred_at >= since)
    counted = select(func.count()).select_from(ContactEvent).where(*conditions).scalar_subquery()
    return _sql_compare(predicate.op, counted, predicate.count)


def _compile_segment(
    predicate: InSegment, *, workspace_id: int, now: datetime, custom: Mapping[str, str]
) -> ColumnElement[bool]:
    """A saved segment's conditions; a reference without them matches nobody (as in
    evaluate)."""
    if predicate.predicate is None:
        return false()
    return compile_sql(predicate.predicate, workspace_id=workspace_id, now=now, custom=custom)


def decode_predicate(raw: Any) -> Predicate:
    """Decode a predicate from JSON-compatible data (raises msgspec.ValidationError)."""
    decoded: Predicate = msgspec.convert(raw, type=Predicate)
    return decoded
