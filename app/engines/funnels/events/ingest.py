"""Event ingestion (FN-13): store first, answer, then turn stored events into contact events.

The request path does one thing: :func:`store` inserts the raw event into
``funnel_inbound_events`` (``ON CONFLICT DO NOTHING`` on the sender's event id, so a retried
webhook stores nothing new) and the sender is answered. :func:`process_batch` runs off the request
path (a job, and every tick): it leases unprocessed rows in one statement, finds or creates the
contact, applies what the event means (form fields, tags and lists, suppression after a bounce,
a complaint or an unsubscribe, a campaign's delivery report) and records a contact event, which the
trigger matcher then matches to funnels. A bad event is recorded as dropped, with the reason, and
does not hold back the others: the events of the simple sources (API events, site visits,
tracking, bookings, payments) are applied set-based (apply_set.py), where each check comes before
any write; forms and delivery reports each in their own savepoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, update

from app.clock import Clock
from app.db.dialect import concurrent_writers, insert
from app.db.session import Database, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.campaigns.service import record_delivery_event
from app.engines.funnels.contacts.events import record_events
from app.engines.funnels.contacts.fields import check_field_value, field_types
from app.engines.funnels.contacts.memberships import add_tag, add_to_list
from app.engines.funnels.contacts.store import create_contact, find_by_email
from app.engines.funnels.errors import DuplicateContact
from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.models import Form, InboundEvent
from app.engines.funnels.events.records.delivery_reports import (
    parse_funnel_message_id,
    record_funnel_report,
)
from app.engines.funnels.events.work.apply_set import Applied, apply_planned, report_tracked
from app.engines.funnels.events.work.inbound import (
    PLANNERS,
    Dropped,
    Inbound,
    Plan,
    contact_event,
    contact_key,
    new_contact,
    text,
)
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.jobs import wake_runners
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.work.unsubscribe import apply_report
from app.errors import DomainError
from app.scheduling.claim import Claim
from app.scheduling.jobs import JobContext, JobPayload, JobSpec
from app.scheduling.queue import JobQueue
from app.scheduling.unavailable import QueueUnavailable

log = logging.getLogger(__name__)

SUPPRESSING = {"bounced": "bounced", "complained": "complained", "unsubscribed": "unsubscribed"}
DELIVERY_KINDS = ("delivered", "opened", "clicked", *SUPPRESSING)


async def store(
    session: WriteSession,
    *,
    workspace_id: int,
    source: str,
    name: str,
    external_id: str | None,
    payload: Mapping[str, Any],
    now: datetime,
) -> int | None:
    """Insert one inbound event; its id, or ``None`` when the sender's id was seen before."""
    stmt = (
        insert(session, InboundEvent)
        .values(
            workspace_id=workspace_id,
            source=source,
            name=name,
            external_id=external_id,
            payload=dict(payload),
            received_at=now,
        )
        .on_conflict_do_nothing()
        .returning(InboundEvent.id)
    )
    event_id: int | None = await session.scalar(stmt)
    return event_id


@dataclass(slots=True)
class ProcessResult:
    processed: int = 0
    recorded: int = 0
    dropped: int = 0
    contacts: dict[int, set[int]] = field(default_factory=dict)
    """Contacts the processed events were about, by workspace."""


# Claiming an event marks it processed; the batch's transaction applies it (or rolls both back).
CLAIM = Claim(
    table=InboundEvent.__table__,  # type: ignore[arg-type]
    due="processed_at IS NULL",
    order_by="id",
    returning=("id", "workspace_id", "source", "name", "external_id", "payload", "received_at"),
    sets={"processed_at": ":now"},
)


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else {}


BATCH_EVENTS = 200
"""Stored events applied per transaction on PostgreSQL, where the transaction locks only its
own rows."""

BATCH_EVENTS_SQLITE = 10
"""On SQLite, where the transaction holds the one write lock that every request storing an
event waits for (app/db/write_gate.py): applying an event in its own savepoint (forms, delivery
reports) takes about 3 ms of statements here, so ten keep the hold near 30 ms even when all are
of those. Two hundred held it for 600 ms, and a webhook arriving then waited as long. (Set-based,
ten events of the other sources take about 5 ms: bench/ingest_apply.py.)"""


_INBOUND = cast(Table, InboundEvent.__table__)


async def _record_outcomes(session: WriteSession, outcomes: list[dict[str, Any]]) -> None:
    """One statement for the batch's outcomes (an update by primary key, run as executemany),
    not one per event; on the table, which the ORM's bulk update would only look at row by row
    again. The rows are the batch's own, claimed by :data:`CLAIM` across workspaces."""
    statement = (
        update(_INBOUND)
        .where(_INBOUND.c.id == bindparam("row_id"))
        .values(contact_id=bindparam("row_contact"), outcome=bindparam("row_outcome"))
    )
    await session.execute(statement, outcomes)


def batch_events(db: Database) -> int:
    return BATCH_EVENTS if concurrent_writers(db) else BATCH_EVENTS_SQLITE


async def process_batch(
    db: Database, *, now: datetime, limit: int | None = None, one_by_one: bool = False
) -> ProcessResult:
    """Process one batch of stored events (``limit``, by default :func:`batch_events`), all in
    one transaction.

    ``one_by_one`` applies every event in its own savepoint, as forms and delivery reports are
    applied (what the set-based path is compared with, in tests and bench/ingest_apply.py)."""
    result = ProcessResult()
    async with db.write() as uow:
        session = uow.session
        rows = await CLAIM.take_in(
            session, now=now, limit=batch_events(db) if limit is None else limit
        )
        events = [
            Inbound(row[0], row[1], row[2], row[3], row[4], _as_dict(row[5]))
            for row in sorted(rows, key=lambda r: r[0])
        ]
        applied = await _apply_all(session, events, now, one_by_one=one_by_one)
        outcomes: list[dict[str, Any]] = []
        for inbound in events:
            contact_id, dropped = applied[inbound.id].contact_id, applied[inbound.id].dropped
            result.processed += 1
            if dropped is None:
                result.recorded += 1
                if contact_id is not None:
                    result.contacts.setdefault(inbound.workspace_id, set()).add(contact_id)
            else:
                result.dropped += 1
            outcome = "recorded" if dropped is None else f"dropped: {dropped}"
            outcomes.append(
                {"row_id": inbound.id, "row_contact": contact_id, "row_outcome": outcome[:2000]}
            )
        if outcomes:
            await _record_outcomes(session, outcomes)
    return result


async def _apply_all(
    session: WriteSession, events: list[Inbound], now: datetime, *, one_by_one: bool
) -> dict[int, Applied]:
    """Each event's outcome, by inbound id. Runs of planned events (inbound.PLANNERS) are applied
    set-based; any other event (a form, a delivery report) alone in its savepoint, after the
    planned events before it: a form creates or changes contacts, so every event still sees the
    contacts as the events before it left them."""
    applied: dict[int, Applied] = {}
    run: list[tuple[Inbound, Plan]] = []
    for event in events:
        planner = None if one_by_one else PLANNERS.get(event.source)
        if planner is None:
            applied.update(await apply_planned(session, run, now))
            run = []
            applied[event.id] = await _apply_alone(session, event, now)
            continue
        try:
            run.append((event, planner(event)))
        except (Dropped, DomainError) as exc:
            applied[event.id] = Applied(None, exc)
    applied.update(await apply_planned(session, run, now))
    return applied


async def _apply_alone(session: WriteSession, event: Inbound, now: datetime) -> Applied:
    try:
        async with session.begin_nested():
            return Applied(await _apply(session, event, now))
    except (Dropped, DomainError) as exc:
        return Applied(None, exc)


async def _apply(session: WriteSession, event: Inbound, now: datetime) -> int:
    if event.source == "form":
        return await _apply_form(session, event, now)
    if event.source == "delivery":
        return await _apply_delivery(session, event, now)
    planner = PLANNERS.get(event.source)
    if planner is None:
        raise Dropped(f"unknown source {event.source}")
    plan = planner(event)
    contact = await resolve_contact(session, event.workspace_id, plan.who, now, create=plan.create)
    if plan.tracked is not None:
        await report_tracked(session, event, plan.tracked, now)
    await _record(session, event, contact, plan.name, plan.properties, now)
    return contact.id


async def _record(
    session: WriteSession,
    event: Inbound,
    contact: Contact,
    name: str,
    properties: Mapping[str, Any],
    now: datetime,
) -> None:
    await record_events(session, [contact_event(event, contact.id, name, properties, now)])


async def resolve_contact(
    session: WriteSession,
    workspace_id: int,
    who: Mapping[str, Any],
    now: datetime,
    *,
    create: bool,
) -> Contact:
    """The contact an event is about: by ``id``, or by ``email`` (created when ``create``)."""
    key = contact_key(who)
    if isinstance(key, int):
        contact_id = key
        contact = await session.scalar(
            scoped_select(Contact, workspace_id).where(
                Contact.id == contact_id, Contact.deleted_at.is_(None)
            )
        )
        if contact is None:
            raise Dropped(f"no contact {contact_id}")
        return contact
    email = key
    found = await find_by_email(session, workspace_id, email)
    if found is not None:
        return found
    if not create:
        raise Dropped(f"no contact with e-mail {email}")
    data = new_contact(email, who)
    try:
        async with session.begin_nested():
            return await create_contact(session, workspace_id, data, now)
    except DuplicateContact:
        # Created by a concurrent event for the same person a moment ago.
        found = await find_by_email(session, workspace_id, email)
        if found is None:
            raise
        return found


async def _apply_form(session: WriteSession, event: Inbound, now: datetime) -> int:
    p = event.payload
    form = await session.scalar(
        scoped_select(Form, event.workspace_id).where(Form.public_id == p.get("form"))
    )
    if form is None:
        raise Dropped("the form no longer exists")
    values: dict[str, Any] = {
        k: v for k, v in (p.get("values") or {}).items() if isinstance(k, str)
    }
    contact = await resolve_contact(session, event.workspace_id, values, now, create=True)
    types = await field_types(session, event.workspace_id)
    custom: dict[str, Any] = {}
    for key, raw in values.items():
        if key in types and raw not in (None, ""):
            try:
                custom[key] = check_field_value(key, types[key], _typed(types[key], raw))
            except DomainError:
                continue  # a wrong value in one field does not lose the submission
    for attribute in ("first_name", "last_name", "phone"):
        given = text(values.get(attribute))
        if given:
            setattr(contact, attribute, given)
    if custom:
        contact.fields = {**(contact.fields or {}), **custom}
    contact.updated_at = now
    await session.flush()
    if form.add_tag:
        await add_tag(session, contact, form.add_tag, now)
    if form.add_list:
        await add_to_list(session, contact, form.add_list, now)
    await _record(session, event, contact, "form_submit", {"form": form.public_id}, now)
    return contact.id


def _typed(kind: str, raw: Any) -> Any:
    """Form posts carry text; numbers and booleans are converted before the type check."""
    if not isinstance(raw, str):
        return raw
    if kind == "number":
        try:
            return int(raw)
        except ValueError:
            try:
                return float(raw)
            except ValueError:
                return raw
    if kind == "boolean":
        return raw.lower() in {"true", "yes", "on", "1"}
    return raw


async def _apply_delivery(session: WriteSession, event: Inbound, now: datetime) -> int:
    """A provider's report about one message: delivered, opened, clicked, bounced, complained or
    unsubscribed. Funnel and campaign messages are found by the Message-ID we gave them (a
    provider's native report may give several ids: the first one we recognise wins), so a report
    carrying only the Message-ID is attributed to its contact and its message node."""
    p = event.payload
    kind = event.name
    if kind not in DELIVERY_KINDS:
        raise Dropped(f"unknown delivery event kind {kind}")
    given = p.get("message_ids")
    ids = [str(i) for i in given] if isinstance(given, list) else [str(p.get("message_id", ""))]
    who: dict[str, Any] = {"email": p.get("email")}
    campaign: tuple[int, int] | None = None
    effect_key: str | None = None
    for message_id in ids:
        campaign = parse_campaign_message_id(message_id)
        funnel = None if campaign else parse_funnel_message_id(message_id)
        if campaign is not None:
            contact_id = await record_delivery_event(
                session,
                campaign_id=campaign[0],
                seq=campaign[1],
                kind=kind,
                external_id=event.external_id,
                at=now,
                workspace_id=event.workspace_id,
            )
            if contact_id is None:
                raise Dropped("no such campaign message in this workspace")
            who = {"id": contact_id}
            break
        if funnel is not None:
            if funnel.workspace_id != event.workspace_id:
                raise Dropped("the message was sent by another workspace")
            effect = await record_funnel_report(
                session,
                workspace_id=event.workspace_id,
                effect_key=funnel.effect_key,
                kind=kind,
                detail=f"reported by {p.get('provider') or 'the provider'}",
                at=now,
            )
            if effect is None:
                raise Dropped("no such funnel message in this workspace")
            who, effect_key = {"id": effect.contact_id}, funnel.effect_key
            break
    contact = await resolve_contact(session, event.workspace_id, who, now, create=False)
    if kind in SUPPRESSING:
        # A hard bounce or a complaint stops all mail to the address; an unsubscribe reported by
        # the provider is the contact leaving all marketing mail (transactional mail continues).
        contact.suppressed = apply_report(contact.suppressed, SUPPRESSING[kind])
        contact.updated_at = now
        await session.flush()
    names = {"opened": "message_opened", "clicked": "link_clicked"}
    name = names.get(kind, f"email_{kind}")
    props = {
        "campaign_id": campaign[0] if campaign else None,
        "effect": effect_key,
        "url": str(p.get("url") or "")[:2000],
    }
    await _record(session, event, contact, name, props, now)
    return contact.id


def parse_campaign_message_id(message_id: str) -> tuple[int, int] | None:
    """``<c{campaign}.r{seq}.w{workspace}@domain>`` → ``(campaign, seq)``."""
    local = message_id.strip().strip("<>").partition("@")[0]
    parts = local.split(".")
    if len(parts) != 3 or not parts[0].startswith("c") or not parts[1].startswith("r"):
        return None
    try:
        return int(parts[0][1:]), int(parts[1][1:])
    except ValueError:
        return None


# -- the job that processes stored events ------------------------------------------------------


class IngestPayload(JobPayload, frozen=True):
    pass


async def run_ingest(ctx: JobContext, payload: IngestPayload) -> None:
    """Process stored events, match the resulting contact events to funnels (which also
    evaluates the segments of the contacts they touched), and wake the runner when runs
    started."""
    started = 0
    for _ in range(20_000 // batch_events(ctx.db)):  # up to 20,000 events a run
        result = await process_batch(ctx.db, now=ctx.clock.now())
        if result.processed == 0:
            break
    for _ in range(100):
        events, entered = await match_events(
            ctx.db, now=ctx.clock.now(), segments=evaluate_segments
        )
        started += entered
        if events == 0:
            break
    if started:
        await wake_runners(ctx)


INGEST = JobSpec("funnels.ingest", IngestPayload, run_ingest, max_tries=5, timeout_seconds=120)


class ProcessingRequests:
    """Asks for stored events to be processed soon, after a request stored one: at most one job
    per half second per process (and per half second across processes, by job id), so a burst
    of events costs a burst of inserts, not a burst of jobs. Measured on the process's clock.
    A queue that cannot be reached loses only the request, not the event (see :meth:`request`)."""

    def __init__(self, queue: JobQueue, clock: Clock) -> None:
        self.queue = queue
        self.clock = clock
        self._last: float | None = None

    async def request(self, now: datetime) -> None:
        """``now``: the clock's time the event was stored at (names the job's half second)."""
        monotonic = self.clock.monotonic()
        if self._last is not None and monotonic - self._last < 0.5:
            return
        self._last = monotonic
        bucket = int(now.timestamp() * 2)
        try:
            await self.queue.enqueue(
                None, INGEST, IngestPayload(), job_id=f"funnels.ingest:{bucket}"
            )
        except QueueUnavailable:
            # The event is committed, and the sweep's backstop pass (funnels.triggers, every
            # 10 s) processes it once the queue answers: a 503 would only make the sender
            # retry an event already stored. The queue logs the outage once, not per event.
            return
