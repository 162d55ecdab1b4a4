"""Triggers: stored events are matched to funnels, off the request path.

An event is written first (``contact_events``, in the transaction that caused it, or by the
ingestion endpoint). The matcher leases unmatched events in batches and, in one transaction:
wakes runs whose wait ends early on that event (FN-11, FN-14), and starts runs in every active
published funnel whose trigger matches, when the entry predicate admits the contact (FN-12).
Matching and run creation commit together with the event's ``matched_at``; a matcher that dies
leaves the events unmatched for the next one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select, tuple_, update

from app.db.session import Database, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.facts import load_facts
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import (
    Predicate,
    compile_sql,
    evaluate,
    event_matches,
    max_event_window,
)
from app.engines.funnels.definitions.graph import (
    ApiEvent,
    BookingMade,
    ContactCreated,
    FormSubmit,
    LinkClicked,
    ListJoin,
    Manual,
    MessageOpened,
    PageVisit,
    PaymentMade,
    TagAdded,
    Trigger,
    Wait,
    graph_for_version,
)
from app.engines.funnels.models import RUN_ACTIVE, Contact, ContactEvent, FunnelVersion, Run
from app.engines.funnels.runs.due.entry import enter_many, published_versions
from app.engines.funnels.runs.states import RUNS
from app.scheduling.claim import Claim

ENROLL_PIECE = 500


@dataclass(frozen=True, slots=True)
class StoredEvent:
    id: int
    workspace_id: int
    contact_id: int
    name: str
    source: str
    properties: dict[str, Any]


def trigger_matches(trigger: Trigger, event: StoredEvent) -> bool:
    """The trigger's kind fits the event, and the event's properties pass the trigger's filter
    (in memory: the batch's events are loaded already, no query per event)."""
    if not _kind_matches(trigger, event):
        return False
    return trigger.filter is None or event_matches(trigger.filter, event.properties)


def _kind_matches(trigger: Trigger, event: StoredEvent) -> bool:
    if isinstance(trigger, ContactCreated):
        return event.name == "contact_created"
    if isinstance(trigger, TagAdded):
        return event.name == "tag_added" and event.properties.get("tag") == trigger.tag
    if isinstance(trigger, ListJoin):
        return event.name == "list_join" and event.properties.get("list") == trigger.list
    if isinstance(trigger, ApiEvent):
        return event.source == "api" and event.name == trigger.event
    if isinstance(trigger, Manual):
        return False
    return _activity_matches(trigger, event)


def _activity_matches(trigger: Trigger, event: StoredEvent) -> bool:
    """Triggers fed by ingested activity (forms, site, tracking, bookings, payments). The
    time-based ones (date_field, schedule) and segment_enter start runs from their sweeps."""
    props = event.properties
    if isinstance(trigger, FormSubmit):
        return event.name == "form_submit" and props.get("form") == trigger.form
    if isinstance(trigger, PageVisit):
        return event.name == "page_visit" and trigger.url_contains in str(props.get("url", ""))
    if isinstance(trigger, MessageOpened):
        return event.name == "message_opened" and (
            trigger.campaign_id is None or props.get("campaign_id") == trigger.campaign_id
        )
    if isinstance(trigger, LinkClicked):
        return event.name == "link_clicked" and trigger.url_contains in str(props.get("url", ""))
    if isinstance(trigger, BookingMade):
        return event.name == "booking_made" and trigger.resource in ("", props.get("resource"))
    if isinstance(trigger, PaymentMade):
        amount = props.get("amount_minor")
        return (
            event.name == "payment_made"
            and isinstance(amount, int)
            and amount >= trigger.min_amount_minor
            and trigger.currency.lower() in ("", str(props.get("currency", "")).lower())
        )
    return False


# Claiming an event marks it matched; the batch's transaction starts its runs (or rolls both back).
CLAIM = Claim(
    table=ContactEvent.__table__,  # type: ignore[arg-type]
    due="matched_at IS NULL",
    order_by="id",
    returning=("id", "workspace_id", "contact_id", "name", "source", "properties"),
    sets={"matched_at": ":now"},
)


class SegmentEvaluator(Protocol):
    """Evaluates the live ``segment_enter`` triggers for some contacts of a workspace and starts
    the runs of those who started matching (:func:`.segment_triggers.evaluate_segments`, which
    builds on this module's entry door; handed in, so this module does not import it back)."""

    async def __call__(
        self,
        session: WriteSession,
        *,
        now: datetime,
        workspace_id: int | None = None,
        contact_ids: Iterable[int] | None = None,
    ) -> int: ...


async def match_events(
    db: Database, *, now: datetime, segments: SegmentEvaluator, limit: int = 500
) -> tuple[int, int]:
    """Match one batch of unmatched events. Returns ``(events, runs started)``."""
    async with db.write() as uow:
        session = uow.session
        rows = await CLAIM.take_in(session, now=now, limit=limit)
        if not rows:
            return 0, 0
        events = [
            StoredEvent(
                id=r[0],
                workspace_id=r[1],
                contact_id=r[2],
                name=r[3],
                source=r[4],
                properties=_as_dict(r[5]),
            )
            for r in sorted(rows, key=lambda r: r[0])
        ]
        started = await match(session, events, now=now, segments=segments)
        return len(events), started


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        import json

        loaded = json.loads(value)
        return loaded if isinstance(loaded, dict) else {}
    return {}


async def match(
    session: WriteSession,
    events: Sequence[StoredEvent],
    *,
    now: datetime,
    segments: SegmentEvaluator,
) -> int:
    """Wake waiting runs and start runs for ``events`` (inside the caller's transaction).
    Set-wise: per funnel version, the entry predicate is one query for the whole batch and the
    runs are one multi-row insert."""
    await _wake_waiting(session, events, now)
    by_ws: dict[int, list[StoredEvent]] = defaultdict(list)
    for event in events:
        by_ws[event.workspace_id].append(event)
    funnels = await published_versions(session, sorted(by_ws))
    if not funnels:
        return 0
    live = set(
        await session.scalars(
            select(Contact.id).where(
                Contact.id.in_({e.contact_id for e in events}), Contact.deleted_at.is_(None)
            )
        )
    )
    entries: list[tuple[FunnelVersion, int]] = []
    for ws, ws_events in by_ws.items():
        candidates = [v for f, v in funnels if f.workspace_id == ws]
        if not candidates:
            continue
        custom: dict[str, str] | None = None
        for version in candidates:
            definition = graph_for_version(version.id, version.definition).definition
            # One entry per matching event, as before; the run indexes decide about repeats.
            matched = [
                e.contact_id
                for e in ws_events
                if e.contact_id in live and any(trigger_matches(t, e) for t in definition.triggers)
            ]
            if not matched:
                continue
            if definition.entry_predicate is not None:
                custom = custom if custom is not None else await field_types(session, ws)
                allowed = await admitted(session, version, matched, now, custom)
                matched = [cid for cid in matched if cid in allowed]
            entries.extend((version, cid) for cid in matched)
    started = await enter_many(session, entries, now=now)
    return started + await _segment_entries(session, by_ws, live, now, segments)


async def _segment_entries(
    session: WriteSession,
    by_ws: dict[int, list[StoredEvent]],
    live: set[int],
    now: datetime,
    segments: SegmentEvaluator,
) -> int:
    """FN-10: the contacts these events are about may have started matching a ``segment_enter``
    trigger's segment (a tag added, a list joined, …); evaluated for them now, not only on the
    periodic sweep."""
    started = 0
    for ws, ws_events in by_ws.items():
        touched = {e.contact_id for e in ws_events} & live
        if touched:
            started += await segments(session, now=now, workspace_id=ws, contact_ids=touched)
    return started


async def _wake_waiting(
    session: WriteSession, events: Sequence[StoredEvent], now: datetime
) -> None:
    """A run waiting with ``until_event`` wakes now when one of these events is that event and
    passes the wait's ``event_filter``; the wait node then takes its event branch. Set-wise: one
    query for the runs waiting on these (contact, event) pairs, the filters applied in memory,
    one update per piece of runs woken."""
    pairs = sorted({(e.contact_id, e.name) for e in events})
    if not pairs:
        return
    waiting = (
        await session.execute(
            select(Run.id, Run.contact_id, Run.waiting_event, Run.current_node, Run.version_id)
            .where(
                Run.status == RUN_ACTIVE,
                Run.waiting_event.is_not(None),
                tuple_(Run.contact_id, Run.waiting_event).in_(pairs),
            )
            .order_by(Run.id)
        )
    ).all()
    if not waiting:
        return
    filters = await _wait_filters(session, {(r.version_id, r.current_node) for r in waiting})
    properties: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        properties[(event.contact_id, event.name)].append(event.properties)
    woken = [
        (r.id, r.waiting_event)
        for r in waiting
        if (f := filters.get((r.version_id, r.current_node))) is None
        or any(event_matches(f, props) for props in properties[(r.contact_id, r.waiting_event)])
    ]
    for start in range(0, len(woken), ENROLL_PIECE):
        await session.execute(
            update(Run)
            .execution_options(synchronize_session=False)
            # The run still waits for the event seen above (not moved on meanwhile).
            .where(
                RUNS.keyed(RUN_ACTIVE),
                tuple_(Run.id, Run.waiting_event).in_(woken[start : start + ENROLL_PIECE]),
            )
            .values(woken_by=Run.waiting_event, wake_at=now)
        )


async def _wait_filters(
    session: WriteSession, nodes: set[tuple[int, str]]
) -> dict[tuple[int, str], Predicate]:
    """The event filter of each (version, wait node) that has one."""
    versions: dict[int, dict[str, Any]] = dict(
        (
            await session.execute(
                select(FunnelVersion.id, FunnelVersion.definition).where(
                    FunnelVersion.id.in_({version_id for version_id, _ in nodes})
                )
            )
        ).all()
    )
    out: dict[tuple[int, str], Predicate] = {}
    for version_id, node_id in nodes:
        if version_id not in versions:
            continue
        node = graph_for_version(version_id, versions[version_id]).node(node_id)
        if isinstance(node, Wait) and node.event_filter is not None:
            out[(version_id, node_id)] = node.event_filter
    return out


async def admitted(
    session: WriteSession,
    version: FunnelVersion,
    contact_ids: Sequence[int],
    now: datetime,
    custom: dict[str, str],
) -> set[int]:
    """FN-12 for a batch: the contacts the entry predicate admits, one query per piece of
    contacts (the predicate compiled to SQL, which the property test holds to the Python
    evaluator of :func:`admit`)."""
    ws = version.workspace_id
    predicate = graph_for_version(version.id, version.definition).definition.entry_predicate
    ids = sorted(set(contact_ids))
    allowed: set[int] = set()
    for start in range(0, len(ids), ENROLL_PIECE):
        stmt = scoped_select(Contact, ws, Contact.id).where(
            Contact.id.in_(ids[start : start + ENROLL_PIECE]), Contact.deleted_at.is_(None)
        )
        if predicate is not None:
            stmt = stmt.where(compile_sql(predicate, workspace_id=ws, now=now, custom=custom))
        allowed.update(await session.scalars(stmt))
    return allowed


async def admit(
    session: WriteSession,
    version: FunnelVersion,
    contact_id: int,
    now: datetime,
    custom: dict[str, str],
) -> bool:
    """FN-12: the entry predicate decides at the door, before a run exists."""
    graph = graph_for_version(version.id, version.definition)
    predicate = graph.definition.entry_predicate
    contact = await session.get(Contact, contact_id)
    if contact is None or contact.deleted_at is not None:
        return False
    if predicate is None:
        return True
    names, _ = max_event_window(predicate)
    facts = await load_facts(session, [contact], event_names=names, since=None)
    return evaluate(predicate, facts[contact.id], now=now, custom=custom)


async def enrolment_query(
    session: WriteSession,
    version: FunnelVersion,
    *,
    at: datetime,
    contact_ids: Sequence[int] | None,
    predicate: Predicate | None,
) -> Any:
    """``SELECT contacts.id`` of who the ``manual`` trigger enters: the given contacts, or
    everyone matching ``predicate``, and the funnel's entry predicate, evaluated at ``at``."""
    ws = version.workspace_id
    custom = await field_types(session, ws)
    stmt = scoped_select(Contact, ws, Contact.id).where(Contact.deleted_at.is_(None))
    if contact_ids is not None:
        stmt = stmt.where(Contact.id.in_(list(contact_ids)))
    if predicate is not None:
        stmt = stmt.where(compile_sql(predicate, workspace_id=ws, now=at, custom=custom))
    entry = graph_for_version(version.id, version.definition).definition.entry_predicate
    if entry is not None:
        stmt = stmt.where(compile_sql(entry, workspace_id=ws, now=at, custom=custom))
    return stmt


async def enter_ids(
    session: WriteSession, version: FunnelVersion, ids: Sequence[int], *, now: datetime
) -> int:
    """Start runs for ``ids``; how many started (who is already in is dropped)."""
    started = 0
    # Multi-row inserts, a piece at a time: everyone in a large workspace is a few hundred
    # statements, not one per contact (the unique indexes still drop who is already in).
    for start in range(0, len(ids), ENROLL_PIECE):
        started += await enter_many(
            session, [(version, cid) for cid in ids[start : start + ENROLL_PIECE]], now=now
        )
    return started


async def enroll(
    session: WriteSession,
    version: FunnelVersion,
    *,
    now: datetime,
    contact_ids: Sequence[int] | None = None,
    predicate: Predicate | None = None,
) -> int:
    """The ``manual`` trigger in the caller's transaction: enter the given contacts, or
    everyone matching ``predicate`` (and the funnel's entry predicate). Returns how many runs
    started. The API enters large audiences in chunks instead (:mod:`.enrolment`)."""
    stmt = await enrolment_query(
        session, version, at=now, contact_ids=contact_ids, predicate=predicate
    )
    ids = list(await session.scalars(stmt.order_by(Contact.id)))
    return await enter_ids(session, version, ids, now=now)
