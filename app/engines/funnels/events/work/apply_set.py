"""Applying a run of stored events of the simple sources (inbound.PLANNERS) set-based: their
contacts looked up in a statement per kind (ids, e-mail addresses), the missing ones created in
one multi-row insert, and their contact events recorded in another, instead of four statements
and a savepoint per event.

No event changes what another one sees except by creating a contact, so the run is worked out in
the order the events arrived before anything is written: an event naming an e-mail address that
an earlier event of the run creates finds that contact, one that comes before it does not (as
when each event was applied in turn). An event that cannot be applied writes nothing (each check
comes before the writes), so it needs no savepoint to leave the others unharmed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.db.session import WriteSession
from app.engines.funnels.campaigns.service import record_delivery_event
from app.engines.funnels.contacts.events import record_events
from app.engines.funnels.contacts.store import (
    EmailKey,
    check_contact,
    contact_ids_by_email,
    contact_row,
    create_contacts,
    duplicate_contact,
    live_contacts,
    normal_email,
)
from app.engines.funnels.events.records.delivery_reports import record_funnel_report
from app.engines.funnels.events.tracking import MessageRef
from app.engines.funnels.events.work.inbound import (
    Dropped,
    Inbound,
    Plan,
    contact_event,
    contact_key,
    new_contact,
)
from app.errors import DomainError


@dataclass(frozen=True, slots=True)
class Applied:
    """An event's outcome: the contact it was recorded for, or why it was dropped."""

    contact_id: int | None
    dropped: Exception | None = None


async def report_tracked(
    session: WriteSession, event: Inbound, ref: MessageRef, now: datetime
) -> None:
    """A tracked open or click reported on its funnel message or campaign recipient."""
    kind = "opened" if event.name == "message_opened" else "clicked"
    if ref.effect is not None:
        await record_funnel_report(
            session,
            workspace_id=event.workspace_id,
            effect_key=ref.effect,
            kind=kind,
            detail="tracked",
            at=now,
        )
    if ref.campaign_id is not None and ref.seq is not None:
        await record_delivery_event(
            session,
            campaign_id=ref.campaign_id,
            seq=ref.seq,
            kind=kind,
            external_id=None,
            at=now,
            workspace_id=event.workspace_id,
        )


@dataclass(slots=True)
class _Named:
    """A planned event and the contact it names: by id, or by (workspace, e-mail)."""

    event: Inbound
    plan: Plan
    contact_id: int | None
    email: str | None = None
    """The address as given (for the reason it is dropped with)."""
    email_key: EmailKey | None = None


async def apply_planned(
    session: WriteSession, planned: Sequence[tuple[Inbound, Plan]], now: datetime
) -> dict[int, Applied]:
    """Apply these events (in the order they arrived), by inbound id."""
    out: dict[int, Applied] = {}
    named = _named(planned, out)
    live = await live_contacts(
        session, {(n.event.workspace_id, n.contact_id) for n in named if n.contact_id is not None}
    )
    found = await contact_ids_by_email(
        session, {n.email_key for n in named if n.email_key is not None}
    )
    waiting, to_create = _to_create(named, live, found, out, now)
    if to_create:
        # In (workspace, e-mail) order: two batches applied at once on PostgreSQL that create
        # some of the same contacts wait for each other in one order, rather than each holding a
        # contact the other waits for (a deadlock).
        created = await create_contacts(session, [to_create[k] for k in sorted(to_create)], now)
        lost = [key for key in to_create if key not in created]
        if lost:
            # Created by a concurrent transaction a moment ago: that contact is the one.
            created.update(await contact_ids_by_email(session, lost))
        found.update(created)
    rows: list[dict[str, Any]] = []
    for n in waiting:
        contact_id = n.contact_id if n.email_key is None else found.get(n.email_key)
        if contact_id is None:
            # Its address was taken concurrently by a contact that is gone again.
            reason = (
                duplicate_contact(n.email_key[1] if n.email_key else None)
                if n.plan.create
                else Dropped(f"no contact with e-mail {n.email}")
            )
            out[n.event.id] = Applied(None, reason)
            continue
        if n.plan.tracked is not None:
            await report_tracked(session, n.event, n.plan.tracked, now)
        rows.append(contact_event(n.event, contact_id, n.plan.name, n.plan.properties, now))
        out[n.event.id] = Applied(contact_id)
    await record_events(session, rows)
    return out


def _named(planned: Sequence[tuple[Inbound, Plan]], out: dict[int, Applied]) -> list[_Named]:
    """The events that name a contact; the others dropped into ``out``."""
    named: list[_Named] = []
    for event, plan in planned:
        try:
            key = contact_key(plan.who)
        except Dropped as exc:
            out[event.id] = Applied(None, exc)
            continue
        if isinstance(key, int):
            named.append(_Named(event, plan, key))
        else:
            named.append(_Named(event, plan, None, key, (event.workspace_id, normal_email(key))))
    return named


def _to_create(
    named: list[_Named],
    live: set[tuple[int, int]],
    found: dict[EmailKey, int],
    out: dict[int, Applied],
    now: datetime,
) -> tuple[list[_Named], dict[EmailKey, dict[str, Any]]]:
    """The events whose contact exists or is created, and the contacts to create: each by the
    first event that asks for it with valid details. The events after that one name the new
    contact, as they found it when applied in turn; the others are dropped into ``out``."""
    to_create: dict[EmailKey, dict[str, Any]] = {}
    waiting: list[_Named] = []
    for n in named:
        if n.email_key is None:
            if (n.event.workspace_id, n.contact_id) in live:
                waiting.append(n)
            else:
                out[n.event.id] = Applied(None, Dropped(f"no contact {n.contact_id}"))
            continue
        if n.email_key in found or n.email_key in to_create:
            waiting.append(n)
            continue
        if not n.plan.create:
            out[n.event.id] = Applied(None, Dropped(f"no contact with e-mail {n.email}"))
            continue
        data = new_contact(str(n.email), n.plan.who)
        try:
            # No custom fields in an event's contact: the workspace's field types are not needed.
            row = contact_row(n.event.workspace_id, data, check_contact(data, {}), now)
        except DomainError as exc:
            out[n.event.id] = Applied(None, exc)
            continue
        to_create[n.email_key] = row
        waiting.append(n)
    return waiting, to_create
