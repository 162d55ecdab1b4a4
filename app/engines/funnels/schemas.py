"""Request and response structs of the Funnels API (contacts, funnels, versions, runs)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from app.engines.funnels.contacts.memberships import (
    MAX_LISTS_PER_CONTACT,
    MAX_NAME_CHARS,
    MAX_TAGS_PER_CONTACT,
)
from app.engines.funnels.contacts.segments import Predicate
from app.engines.funnels.contacts.store import ContactData
from app.engines.funnels.models import Contact, Funnel, FunnelVersion, OutboxEffect, Run, Step
from app.schemas import (
    MAX_ITEMS,
    NOT_BLANK,
    EmailAddress,
    Int64,
    Key,
    Name,
    RowRef,
    Schema,
    Text,
    Upload,
)

FieldValue = str | int | float | bool | None
Consent = Literal["granted", "withdrawn"]
MAX_ENROLL_IDS = 10_000
MembershipName = Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]
Phone = Annotated[str, msgspec.Meta(max_length=40)]
ZoneName = Annotated[str, msgspec.Meta(max_length=64)]
"""An IANA time zone name (``Europe/London``)."""
FieldKey = Annotated[str, msgspec.Meta(max_length=64)]
"""A custom field's key, as its definition stores it."""
TagNames = Annotated[list[MembershipName], msgspec.Meta(max_length=MAX_TAGS_PER_CONTACT)]
ListNames = Annotated[list[MembershipName], msgspec.Meta(max_length=MAX_LISTS_PER_CONTACT)]


class ContactIn(Schema):
    email: EmailAddress | None = None
    phone: Phone | None = None
    first_name: Name | None = None
    last_name: Name | None = None
    timezone: ZoneName | None = None
    fields: (
        Annotated[dict[Key, Text | Int64 | float | bool | None], msgspec.Meta(max_length=MAX_ITEMS)]
        | None
    ) = None
    tags: TagNames | None = None
    lists: ListNames | None = None
    consent: Annotated[dict[Key, Consent], msgspec.Meta(max_length=100)] | None = None
    suppressed: Annotated[dict[Key, Text], msgspec.Meta(max_length=100)] | None = None
    """Channel -> reason (unsubscribed, bounced, complained); replaces the whole map."""

    def data(self) -> ContactData:
        return ContactData(
            email=self.email,
            phone=self.phone,
            first_name=self.first_name,
            last_name=self.last_name,
            timezone=self.timezone,
            fields=self.fields,
            tags=self.tags,
            lists=self.lists,
            consent=self.consent,
            suppressed=self.suppressed,
        )


class ContactOut(Schema):
    id: int
    email: str | None
    phone: str | None
    first_name: str
    last_name: str
    timezone: str
    fields: dict[str, Any]
    tags: list[str]
    lists: list[str]
    consent: dict[str, str]
    suppressed: dict[str, str]
    created_at: datetime
    updated_at: datetime


def contact_out(c: Contact, tags: list[str], lists: list[str]) -> ContactOut:
    return ContactOut(
        id=c.id,
        email=c.email,
        phone=c.phone,
        first_name=c.first_name,
        last_name=c.last_name,
        timezone=c.timezone,
        fields=dict(c.fields or {}),
        tags=tags,
        lists=lists,
        consent=dict(c.consent or {}),
        suppressed=dict(c.suppressed or {}),
        created_at=c.created_at,
        updated_at=c.updated_at,
    )


class ContactImportIn(Schema):
    csv: Upload
    """The file's text: a header row, then one contact per row."""
    columns: Annotated[dict[Name, Key], msgspec.Meta(max_length=MAX_ITEMS)] | None = None
    """CSV header -> what the column becomes: ``email``, ``phone``, ``first_name``,
    ``last_name``, ``timezone``, a custom field key, ``tags`` or ``lists`` (``;``-separated), or
    ``""`` to leave it out. Columns not named here map to themselves."""


class FieldIn(Schema):
    key: FieldKey
    type: Literal["text", "number", "date", "boolean"]
    label: Name = ""


class FieldOut(Schema):
    key: Key
    type: str
    label: str


class NameIn(Schema):
    # Stripped, 1 to 100 characters (the tags' and lists' rule), as the document states it.
    name: Annotated[Name, msgspec.Meta(extra_json_schema={"pattern": NOT_BLANK, "maxLength": 100})]


CapLimit = Annotated[int, msgspec.Meta(ge=1, le=1000)]


class FrequencyCapIn(Schema):
    """At most ``per_day`` / ``per_week`` marketing messages per contact, across every funnel
    and campaign (``null``: no limit for that period). Transactional mail is not counted."""

    per_day: CapLimit | None = None
    per_week: CapLimit | None = None


class FrequencyCapOut(Schema):
    per_day: int | None
    per_week: int | None


class NamesOut(Schema):
    names: list[str]


class SegmentPreviewIn(Schema):
    predicate: Predicate


class SegmentPreviewOut(Schema):
    count: int
    sample: list[int]
    """Ids of up to 20 matching contacts."""


class FunnelIn(Schema):
    name: Name
    definition: Annotated[dict[Key, Any], msgspec.Meta(max_length=MAX_ITEMS)] = msgspec.field(
        default_factory=dict
    )


class FunnelPatch(Schema):
    name: Name | None = None
    definition: Annotated[dict[Key, Any], msgspec.Meta(max_length=MAX_ITEMS)] | None = None
    active: bool | None = None


class ProblemOut(Schema):
    node_id: str | None
    rule: str
    code: str
    message: str
    field: str | None = None
    """The node's setting the problem is about, when it is about one (``hour``)."""


class FunnelOut(Schema):
    id: int
    name: str
    active: bool
    draft: dict[str, Any]
    current_version: int | None
    runs: dict[str, int]
    created_at: datetime
    updated_at: datetime
    messages_in_outbox: int | None = None
    """Messages of this funnel still waiting to go out (a run that ``completed`` may still have
    mail in the outbox); given when one funnel is shown."""


def funnel_out(f: Funnel, version_number: int | None, runs: dict[str, int]) -> FunnelOut:
    return FunnelOut(
        id=f.id,
        name=f.name,
        active=f.active,
        draft=f.draft,
        current_version=version_number,
        runs=runs,
        created_at=f.created_at,
        updated_at=f.updated_at,
    )


class ValidationOut(Schema):
    valid: bool
    problems: list[ProblemOut]


class VersionOut(Schema):
    id: int
    number: int
    definition: dict[str, Any]
    reentry: bool
    published_at: datetime


def version_out(v: FunnelVersion) -> VersionOut:
    return VersionOut(
        id=v.id,
        number=v.number,
        definition=v.definition,
        reentry=v.reentry,
        published_at=v.published_at,
    )


class EnrollIn(Schema):
    """The manual trigger: the given contacts, or everyone matching ``predicate``."""

    contact_ids: Annotated[list[RowRef], msgspec.Meta(max_length=MAX_ENROLL_IDS)] | None = None
    """At most 10,000; a predicate reaches any number."""
    predicate: Predicate | None = None


class EnrollOut(Schema):
    started: int
    """Runs started; while ``job`` runs, those of the first chunk (the job counts the rest)."""
    job: str | None = None
    """A large enrolment continues as a bulk job: its status URL (``started`` in its counters)."""


class FunnelRunOut(Schema):
    id: int
    contact_id: int
    version_id: int
    status: str
    current_node: str
    wake_at: datetime | None
    context: dict[str, Any]
    step_count: int
    failures: int
    last_error: str | None
    entered_at: datetime
    ended_at: datetime | None
    exit_reason: str | None


def run_out(r: Run) -> FunnelRunOut:
    return FunnelRunOut(
        id=r.id,
        contact_id=r.contact_id,
        version_id=r.version_id,
        status=r.status,
        current_node=r.current_node,
        wake_at=r.wake_at,
        context=r.context or {},
        step_count=r.step_count,
        failures=r.failures,
        last_error=r.last_error,
        entered_at=r.entered_at,
        ended_at=r.ended_at,
        exit_reason=r.exit_reason,
    )


class FunnelStepOut(Schema):
    seq: int
    node_id: str
    kind: str
    decision: str
    output: dict[str, Any]
    at: datetime


def step_out(s: Step) -> FunnelStepOut:
    return FunnelStepOut(
        seq=s.seq, node_id=s.node_id, kind=s.kind, decision=s.decision, output=s.output, at=s.at
    )


class EffectOut(Schema):
    id: int
    node_id: str
    channel: str
    status: str
    attempts: int
    next_attempt_at: datetime
    finished_at: datetime | None
    last_error: str | None


def effect_out(e: OutboxEffect) -> EffectOut:
    return EffectOut(
        id=e.id,
        node_id=e.node_id,
        channel=e.channel,
        status=e.status,
        attempts=e.attempts,
        next_attempt_at=e.next_attempt_at,
        finished_at=e.finished_at,
        last_error=e.last_error,
    )


class RunDetailOut(Schema):
    run: FunnelRunOut
    steps: list[FunnelStepOut]
    effects: list[EffectOut]


class TimelineEntryOut(Schema):
    at: datetime
    kind: str
    title: str
    detail: str
    run_id: int | None


class TimelineOut(Schema):
    contact: ContactOut
    entries: list[TimelineEntryOut]
