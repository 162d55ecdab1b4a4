"""A funnel's definition: its graph of nodes (a msgspec tagged union of the 23 node kinds), the
triggers that start it, the entry predicate checked at the door, and its settings
(:mod:`.funnel_settings`).

Every node has an ``id``; edges are node ids held in fields named ``next``, ``yes``/``no``,
``event_next`` or in split branches. A node without an outgoing edge ends the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import lru_cache
from typing import Annotated, Any, Literal

import msgspec

from app.engines.funnels.contacts.segments import Predicate
from app.engines.funnels.definitions.funnel_settings import FunnelSettings

NodeId = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_\-]+$")]


class _Node(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, kw_only=True):
    id: NodeId
    entry: bool = False
    """Marks the node a new run starts at (exactly one per graph)."""
    label: str = ""


class _Linear(_Node, kw_only=True):
    next: str | None = None


class _Effect(_Linear, kw_only=True):
    """A node whose effect goes outside (a message, a request): it can fail for good."""

    on_failure: str | None = None
    """Where the run continues when the effect cannot be carried out (the contact lacks the
    field the channel needs, the provider refused it, retries ran out). Without it the run ends
    ``failed`` with the reason (see :mod:`app.engines.funnels.runs.work.effect_failures`)."""


# -- send something ----------------------------------------------------------------------------


class _Message(_Effect, kw_only=True):
    """A message to the contact."""

    transactional: bool = False
    """This message is one the contact asked for (an order's confirmation in an otherwise
    marketing funnel): as if its funnel were marked transactional — no unsubscribe headers,
    sent despite marketing opt-outs (never after a bounce or a complaint), not counted by the
    frequency cap."""
    best_hour: bool = False
    """Send at the contact's best hour, learnt from when they opened and clicked before (the
    step's own time when there is too little history); quiet hours still apply (see
    :mod:`app.engines.funnels.sendtime`)."""


class SendEmail(_Message, tag="send_email"):
    subject: str = ""
    body: str = ""
    html: str | None = None


class SendSms(_Message, tag="send_sms"):
    text: str = ""


class SendPush(_Message, tag="send_push"):
    title: str = ""
    body: str = ""


class SendLetter(_Message, tag="send_letter"):
    body: str = ""
    template: str = ""


class NotifyTeam(_Effect, tag="notify_team"):
    to: list[str] = msgspec.field(default_factory=list)
    subject: str = ""
    body: str = ""


# -- change the contact ------------------------------------------------------------------------


class AddTag(_Linear, tag="add_tag"):
    tag: str = ""


class RemoveTag(_Linear, tag="remove_tag"):
    tag: str = ""


class AddToList(_Linear, tag="add_to_list"):
    list: str = ""


class RemoveFromList(_Linear, tag="remove_from_list"):
    list: str = ""


class SetField(_Linear, tag="set_field"):
    field: str = ""
    value: str | int | float | bool | None = None


# -- reach outside -----------------------------------------------------------------------------


class HttpRequest(_Effect, tag="http_request"):
    url: str = ""
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    body: str | None = None
    to_contact: Literal["email", "sms", "push", "letter"] | None = None
    """Set when the request messages the contact through another system (a chat or messaging
    provider's API) on this channel: the contact's choices on it hold the request back as they
    would a message sent on it, and it counts against the frequency cap. Unset, the request
    calls the workspace's own systems about the contact, which is not the contact's to refuse."""
    transactional: bool = False
    """With ``to_contact``: a message the contact asked for (see :class:`_Message`)."""


class CreatePayment(_Effect, tag="create_payment"):
    amount_minor: int = 0
    """Amount in the currency's minor units (cents)."""
    currency: str = ""
    description: str = ""


class BookSlot(_Effect, tag="book_slot"):
    resource: str = ""
    duration_minutes: int = 30


# -- between funnels ---------------------------------------------------------------------------


class EnterFunnel(_Linear, tag="enter_funnel"):
    funnel_id: int = 0


class ExitFunnel(_Linear, tag="exit_funnel"):
    funnel_id: int | None = None
    """The funnel whose run to end; ``None`` ends this run."""


# -- generate at send time ---------------------------------------------------------------------


class AiGenerate(_Effect, tag="ai_generate"):
    prompt: str = ""
    variable: str = ""
    """Merge variable the generated text fills (``{{variable}}`` in later sends)."""


# -- flow --------------------------------------------------------------------------------------


class Wait(_Linear, tag="wait"):
    """Wait one of: a duration (days/hours/minutes, optionally landing at a local hour); an
    absolute time (``until``); the next ``weekday`` at ``hour``; or a date ``field`` of the
    contact plus ``offset_days`` at ``hour``. Optionally ends early on ``until_event``."""

    days: int = 0
    hours: int = 0
    minutes: int = 0
    until: datetime | None = None
    weekday: int | None = None
    """0 = Monday … 6 = Sunday, in the contact's time zone."""
    field: str | None = None
    offset_days: int = 0
    hour: int | None = None
    """Local hour the wait ends at (with ``minute``); required for weekday and field waits."""
    minute: int = 0
    until_event: str | None = None
    event_filter: Predicate | None = None
    """Only an ``until_event`` whose properties pass this filter ends the wait (``event``
    predicates, e.g. ``plan`` equals ``pro``); other events of that name leave it waiting."""
    event_next: str | None = None
    """Where the run continues when the event ends the wait (default: ``next``)."""


class Condition(_Node, tag="condition"):
    predicate: Predicate
    yes: str | None = None
    no: str | None = None


class SplitBranch(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    name: str
    weight: int
    next: str | None = None


class Experiment(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A split declared an experiment: what converting means, how much evidence a verdict needs
    and whether the verdict routes new entrants (see :mod:`app.engines.funnels.experiments`)."""

    goal_node: str | None = None
    """A goal node of the graph: a run that reaches it after the split converted."""
    goal_event: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] | None = None
    """Or a contact event (``purchase``): the contact converted when it occurs after the split,
    within ``window_days``."""
    value_property: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] | None = None
    """With ``goal_event``: the event's numeric property counted as revenue (``amount_minor``)."""
    value_minor: Annotated[int, msgspec.Meta(ge=0)] = 0
    """With ``goal_node``: what one conversion is worth, in minor units."""
    window_days: Annotated[int, msgspec.Meta(ge=1, le=365)] = 30
    min_sample: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 100
    """Entrants every branch needs before any verdict is given."""
    confidence: Annotated[float, msgspec.Meta(ge=0.5, le=0.999)] = 0.95
    auto_winner: bool = False
    """After a verdict, route new entrants to the winning branch (recorded, reversible)."""


class Split(_Node, tag="split"):
    branches: list[SplitBranch] = msgspec.field(default_factory=list)
    experiment: Experiment | None = None


class Join(_Linear, tag="join"):
    pass


class Goal(_Node, tag="goal"):
    """Ends the run for everyone who reaches it; contacts meeting ``predicate`` anywhere in the
    funnel jump here and the rest of their sequence is cancelled."""

    predicate: Predicate | None = None


class Throttle(_Linear, tag="throttle"):
    limit: int = 0
    period_seconds: int = 3600
    scope: Literal["funnel", "channel"] = "funnel"
    channel: str = "email"


class QuietHours(_Linear, tag="quiet_hours"):
    """From here on, messages of this run are held between ``start_hour`` and ``end_hour``
    (contact's local time) and go out at ``end_hour``."""

    start_hour: int = 21
    end_hour: int = 8


Node = (
    SendEmail
    | SendSms
    | SendPush
    | SendLetter
    | NotifyTeam
    | AddTag
    | RemoveTag
    | AddToList
    | RemoveFromList
    | SetField
    | HttpRequest
    | CreatePayment
    | BookSlot
    | EnterFunnel
    | ExitFunnel
    | AiGenerate
    | Wait
    | Condition
    | Split
    | Join
    | Goal
    | Throttle
    | QuietHours
)

NODE_KINDS: tuple[str, ...] = tuple(
    str(t.__struct_config__.tag)
    for t in (
        SendEmail,
        SendSms,
        SendPush,
        SendLetter,
        NotifyTeam,
        AddTag,
        RemoveTag,
        AddToList,
        RemoveFromList,
        SetField,
        HttpRequest,
        CreatePayment,
        BookSlot,
        EnterFunnel,
        ExitFunnel,
        AiGenerate,
        Wait,
        Condition,
        Split,
        Join,
        Goal,
        Throttle,
        QuietHours,
    )
)
SEND_KINDS = frozenset({"send_email", "send_sms", "send_push", "send_letter", "notify_team"})


# -- triggers ----------------------------------------------------------------------------------


class _Trigger(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, kw_only=True):
    filter: Predicate | None = None
    """Only events whose properties pass this filter start a run (``event`` predicates grouped
    with all / any / not: ``plan`` equals ``pro``, ``amount_minor`` above 10000). The triggers
    without an event (``segment_enter``, ``date_field``, ``schedule``, ``manual``) take none."""


class ContactCreated(_Trigger, tag="contact_created"):
    pass


class TagAdded(_Trigger, tag="tag_added"):
    tag: str


class ListJoin(_Trigger, tag="list_join"):
    list: str


class Manual(_Trigger, tag="manual"):
    pass


class ApiEvent(_Trigger, tag="api_event"):
    event: str


class FormSubmit(_Trigger, tag="form_submit"):
    form: str
    """The public id of a hosted form of the workspace."""


class SegmentEnter(_Trigger, tag="segment_enter"):
    """Fires when a contact starts matching ``predicate`` (re-fires after they stopped)."""

    predicate: Predicate


class PageVisit(_Trigger, tag="page_visit"):
    url_contains: str = ""
    """Visits whose URL contains this text (empty: any page)."""


class MessageOpened(_Trigger, tag="message_opened"):
    campaign_id: int | None = None
    """Only opens of this campaign's message (``None``: any tracked message)."""


class LinkClicked(_Trigger, tag="link_clicked"):
    url_contains: str = ""


class BookingMade(_Trigger, tag="booking_made"):
    resource: str = ""
    """Only bookings of this resource (empty: any)."""


class PaymentMade(_Trigger, tag="payment_made"):
    min_amount_minor: int = 0
    currency: str = ""


class DateField(_Trigger, tag="date_field"):
    """Fires at ``hour:minute`` (contact's time zone) on the date held in ``field`` plus
    ``offset_days``; with ``yearly`` on every anniversary (birthdays, renewals)."""

    field: str
    offset_days: int = 0
    hour: int = 9
    minute: int = 0
    yearly: bool = False


class Schedule(_Trigger, tag="schedule"):
    """Fires every ``every_days`` days (or on ``weekdays``) at ``hour:minute`` in ``timezone``
    and enters everyone matching ``segment`` (and the entry predicate)."""

    hour: int = 9
    minute: int = 0
    every_days: int = 1
    weekdays: list[int] = msgspec.field(default_factory=list)
    """0 = Monday … 6 = Sunday; when set, replaces ``every_days``."""
    timezone: str = "UTC"
    segment: Predicate | None = None


EVENTLESS_TRIGGERS = frozenset({"segment_enter", "date_field", "schedule", "manual"})
"""Triggers that start runs from a sweep or by hand, with no event whose properties a filter
could test."""

Trigger = (
    ContactCreated
    | TagAdded
    | ListJoin
    | Manual
    | ApiEvent
    | FormSubmit
    | SegmentEnter
    | PageVisit
    | MessageOpened
    | LinkClicked
    | BookingMade
    | PaymentMade
    | DateField
    | Schedule
)


class Definition(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """What a draft holds and a version freezes."""

    nodes: list[Node] = msgspec.field(default_factory=list)
    triggers: list[Trigger] = msgspec.field(default_factory=list)
    entry_predicate: Predicate | None = None
    """Checked when a trigger fires, before a run exists (FN-12)."""
    settings: FunnelSettings = msgspec.field(default_factory=FunnelSettings)


def edges(node: Node) -> Iterator[tuple[str, str]]:
    """``(edge name, target id)`` for every outgoing edge of ``node``."""
    if isinstance(node, Condition):
        if node.yes:
            yield "yes", node.yes
        if node.no:
            yield "no", node.no
    elif isinstance(node, Split):
        for branch in node.branches:
            if branch.next:
                yield f"branch:{branch.name}", branch.next
    elif isinstance(node, Goal):
        return
    else:
        if node.next:
            yield "next", node.next
        if isinstance(node, Wait) and node.event_next:
            yield "event_next", node.event_next
        if isinstance(node, _Effect) and node.on_failure:
            yield "on_failure", node.on_failure


def kind_of(node: Node) -> str:
    return str(node.__struct_config__.tag)


class Graph:
    """A decoded definition with nodes indexed by id (built once per version and cached)."""

    def __init__(self, definition: Definition) -> None:
        self.definition = definition
        self.nodes: dict[str, Node] = {n.id: n for n in definition.nodes}
        entries = [n.id for n in definition.nodes if n.entry]
        self.entry: str | None = entries[0] if len(entries) == 1 else None
        self.goals: list[Goal] = [n for n in definition.nodes if isinstance(n, Goal)]

    def node(self, node_id: str) -> Node | None:
        return self.nodes.get(node_id)


def decode_definition(raw: Any) -> Definition:
    """Decode from JSON-compatible data (raises ``msgspec.ValidationError`` naming the field)."""
    return msgspec.convert(raw, type=Definition)


def encode_definition(definition: Definition) -> dict[str, Any]:
    result: dict[str, Any] = msgspec.to_builtins(definition)
    return result


@lru_cache(maxsize=512)
def _cached(version_id: int, raw: bytes) -> Graph:
    return Graph(msgspec.json.decode(raw, type=Definition))


def graph_for_version(version_id: int, definition: dict[str, Any]) -> Graph:
    """The parsed graph of a version, parsed once per process. Keyed by the id *and* the
    content: ids can be reused when a database is recreated, content cannot lie."""
    return _cached(version_id, msgspec.json.encode(definition))
