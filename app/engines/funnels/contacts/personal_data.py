"""Where a contact's personal data is stored: every table and column that can hold it, declared
once, with how the rows of one person are found (FN-33).

Erasure (:func:`app.engines.funnels.contacts.erasure.erase_personal_data`) and the access export
(:func:`app.engines.funnels.contacts.erasure.export_contact`) both walk :data:`REGISTRY`; neither
has a table of its own. A table whose rows are only *linked* to the contact (no personal column)
is declared too, so the export shows it.

Rows stay and are emptied (runs, steps, messages and delivery records keep their history and the
counts built on them); rows that are nothing but the link (tags, lists, segment memberships) and
caches are removed. What suppression keeps is FN-32's keyed hash
(:mod:`app.engines.funnels.contacts.erased_addresses`), never the address.

Every text, JSON or binary column of the schema is either named here or in
:data:`app.engines.funnels.contacts.non_personal.NON_PERSONAL` with the reason it cannot hold a
contact's data; a test keeps it so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table

from app.engines.funnels.campaigns.models import Campaign, CampaignEvent, Recipient
from app.engines.funnels.contacts.personal_match import (
    AnyOf,
    ByAddress,
    ByContact,
    ByParent,
    Finder,
    Person,
    Sealed,
)
from app.engines.funnels.events.models import InboundEvent, SegmentMember, TriggerFire
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
    ContactList,
    ContactTag,
    DeliveryEvent,
    FrequencyCount,
    ListMember,
    OutboxEffect,
    Run,
    Step,
    Tag,
)
from app.engines.funnels.outside.models import AiCacheEntry, AiUsage, EffectResult
from app.engines.funnels.runs.due.entry_gate import EntryGate
from app.platform.audit.models import AuditEntry
from app.platform.models import IdempotencyRecord
from app.scheduling.bulk_models import BulkJob, BulkJobError
from app.scheduling.models import Job, JobAttempt, SweeperState

ERASED = "erased with the contact"
"""What a log line or an outcome that named the person reads afterwards."""
AUDIT_ERASED = {"erased": True}
"""What an audit entry's before/after that named the person holds afterwards."""


def _t(model: Any) -> Table:
    table: Table = model.__table__
    return table


def _sealed_erased(person: Person) -> bytes:
    """A stored idempotency answer after erasure: still sealed, naming no one."""
    assert person.box is not None  # Sealed finds nothing without the box
    return person.box.encrypt('{"erased": true}')


@dataclass(frozen=True, slots=True)
class IfNamed:
    """Erase the column only where it names the person: a sender's event id is the dedup key
    of a retried delivery and stays, unless the provider built it from the address (SES's
    ``ses:<notification>:<recipient>``)."""

    value: Any = None


@dataclass(frozen=True, slots=True)
class Label:
    """A readable name the export adds to each row, from the parent row it points at."""

    column: str
    parent: Table
    field: str
    as_: str


@dataclass(frozen=True, slots=True)
class Entry:
    section: str
    """The export's key for these rows."""
    table: Table
    find: Finder
    erased: Mapping[str, Any | Callable[[Person], Any]] | None
    """Each personal column and what it holds once erased; ``None``: the rows are removed."""
    removed_columns: tuple[str, ...] = ()
    """For removed rows, the columns that held personal data."""
    label: Label | None = None
    single: bool = False
    """The export gives one object (the contact) instead of a list."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The personal columns of the table, as declared."""
        return self.removed_columns if self.erased is None else tuple(self.erased)


_CONTACTS = ByContact()

REGISTRY: tuple[Entry, ...] = (
    Entry(
        "contact",
        _t(Contact),
        ByContact("id"),
        {
            "email": None,
            "phone": None,
            "first_name": "",
            "last_name": "",
            "timezone": "UTC",
            "fields": {},
        },
        single=True,
    ),
    Entry("tags", _t(ContactTag), _CONTACTS, None, label=Label("tag_id", _t(Tag), "name", "tag")),
    Entry(
        "lists",
        _t(ListMember),
        _CONTACTS,
        None,
        label=Label("list_id", _t(ContactList), "name", "list"),
    ),
    Entry("segment_memberships", _t(SegmentMember), _CONTACTS, None),
    Entry(
        "events",
        _t(ContactEvent),
        _CONTACTS,
        {"properties": {}, "external_id": IfNamed()},
    ),
    # Raw inbound payloads: the contact's own, and those that named their address before they
    # were a contact or about a message we do not know (dropped, unattributed).
    Entry(
        "inbound_events",
        _t(InboundEvent),
        AnyOf((_CONTACTS, ByAddress(("payload", "outcome", "external_id"), unlinked="contact_id"))),
        {"payload": {}, "outcome": ERASED, "external_id": IfNamed()},
    ),
    Entry("runs", _t(Run), _CONTACTS, {"context": {}, "last_error": None}),
    Entry(
        "steps",
        _t(Step),
        ByParent(("run_id",), _t(Run)),
        {"output": {}, "decision": ""},
    ),
    Entry("trigger_fires", _t(TriggerFire), _CONTACTS, {}),
    Entry("entry_gate", _t(EntryGate), _CONTACTS, {}),
    Entry(
        "messages", _t(OutboxEffect), _CONTACTS, {"payload": {"erased": True}, "last_error": None}
    ),
    Entry(
        "effect_results",
        _t(EffectResult),
        ByParent(("outbox_id",), _t(OutboxEffect)),
        {"result": {}, "error": None},
    ),
    Entry("delivery_events", _t(DeliveryEvent), _CONTACTS, {"detail": ""}),
    Entry("frequency_counts", _t(FrequencyCount), _CONTACTS, {}),
    Entry(
        "campaigns",
        _t(Recipient),
        _CONTACTS,
        {"detail": None},
        label=Label("campaign_id", _t(Campaign), "name", "campaign_name"),
    ),
    Entry(
        "campaign_events",
        _t(CampaignEvent),
        ByParent(("campaign_id", "seq"), _t(Recipient), ("campaign_id", "seq")),
        {"external_id": IfNamed()},
    ),
    Entry(
        "ai_usage",
        _t(AiUsage),
        ByParent(("idempotency_key",), _t(OutboxEffect), ("idempotency_key",)),
        {},
    ),
    # A cached generation is removed, not emptied: an empty text would be served from the cache.
    Entry("ai_cache", _t(AiCacheEntry), ByAddress(("text",)), None, removed_columns=("text",)),
    Entry(
        "idempotency_answers",
        _t(IdempotencyRecord),
        Sealed("response_body"),
        {"response_body": _sealed_erased},
    ),
    # A contact import's uploaded text, parameters and report (the database's refusal quotes
    # the row), and log lines of the job queue and the sweeps.
    Entry(
        "bulk_jobs",
        _t(BulkJob),
        ByAddress(("source", "params", "last_error")),
        {"source": "", "params": {}, "last_error": ERASED},
    ),
    Entry(
        "bulk_job_errors",
        _t(BulkJobError),
        ByAddress(("message",), workspace=("bulk_job_id", _t(BulkJob))),
        {"message": ERASED},
    ),
    Entry("job_log", _t(Job), ByAddress(("last_error",), workspace=None), {"last_error": ERASED}),
    Entry(
        "job_attempt_log",
        _t(JobAttempt),
        ByAddress(("error",), workspace=None),
        {"error": ERASED},
    ),
    # The audit log's before/after of settings changes may quote an address (an invitation, a
    # person's role): erasure redacts both columns of the entries that name it, the entry
    # itself (who did what, when) stays. The append-only table is unlocked for it.
    Entry(
        "audit_log",
        _t(AuditEntry),
        ByAddress(("before", "after"), workspace=None),
        {"before": AUDIT_ERASED, "after": AUDIT_ERASED},
    ),
    Entry(
        "sweep_log",
        _t(SweeperState),
        ByAddress(("last_error",), workspace=None),
        {"last_error": ERASED},
    ),
)
"""Every table that can hold a contact's personal data, or rows linked to a contact."""


def erased_value(value: Any, person: Person) -> Any:
    return value(person) if callable(value) else value


def declared() -> dict[str, set[str]]:
    """Personal columns by table name, as declared."""
    found: dict[str, set[str]] = {}
    for entry in REGISTRY:
        found.setdefault(entry.table.name, set()).update(entry.columns)
    return found
