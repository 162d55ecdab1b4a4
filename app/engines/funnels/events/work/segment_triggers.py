"""``segment_enter`` (FN-10): a run starts when a contact *starts* matching a predicate.

Who matched at the last evaluation is kept in ``funnel_segment_members``; an evaluation compares
the predicate's SQL membership with it: contacts matching now and not kept are the entrants (kept,
then offered entry — the entry predicate decides at the door, FN-12), kept contacts that stopped
matching are forgotten, so they enter again when they match again. The first evaluation of a
trigger only records the baseline: people already in the segment when the funnel went live did not
*enter* it.

Evaluations run for contacts changed through the contacts API (in the unit of work that changed
them, so a field edit starts the run at once), for the contacts an event touched (right after
ingestion) and for everyone on a periodic sweep (catching time windows that move).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime

import msgspec
from sqlalchemy import delete, select

from app.db.dialect import insert
from app.db.session import WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import compile_sql
from app.engines.funnels.definitions.graph import SegmentEnter, Trigger, graph_for_version
from app.engines.funnels.events.claim.triggers import admit
from app.engines.funnels.events.models import SegmentMember, TriggerFire
from app.engines.funnels.models import Contact, Funnel, FunnelVersion
from app.engines.funnels.runs.due.entry import enter

BASELINE = "baseline"


def trigger_key(trigger: Trigger) -> str:
    """Stable id of a trigger (its content), so republishing the same trigger keeps its state."""
    return hashlib.sha256(msgspec.json.encode(trigger)).hexdigest()[:32]


async def live_versions(
    session: WriteSession, workspace_ids: Iterable[int] | None = None
) -> list[tuple[Funnel, FunnelVersion]]:
    stmt = (
        select(Funnel, FunnelVersion)
        .join(FunnelVersion, FunnelVersion.id == Funnel.current_version_id)
        .where(Funnel.active.is_(True))
        .order_by(Funnel.id)
    )
    if workspace_ids is not None:
        stmt = stmt.where(Funnel.workspace_id.in_(list(workspace_ids)))
    return [(f, v) for f, v in (await session.execute(stmt)).all()]


async def evaluate_segments(
    session: WriteSession,
    *,
    now: datetime,
    workspace_id: int | None = None,
    contact_ids: Iterable[int] | None = None,
) -> int:
    """Evaluate every live ``segment_enter`` trigger (of one workspace, for some contacts, or
    all); returns how many runs started."""
    wanted = None if contact_ids is None else sorted(set(contact_ids))
    started = 0
    versions = await live_versions(session, None if workspace_id is None else [workspace_id])
    for funnel, version in versions:
        graph = graph_for_version(version.id, version.definition)
        for trigger in graph.definition.triggers:
            if isinstance(trigger, SegmentEnter):
                started += await _evaluate(session, funnel, version, trigger, now, wanted)
    return started


CHANGED_CHUNK = 500
"""Contacts evaluated per statement after a bulk change (an import), bounding the IN list."""


async def contacts_changed(
    session: WriteSession, *, workspace_id: int, contact_ids: Iterable[int], now: datetime
) -> int:
    """FN-10 right away: contacts whose fields, tags or lists just changed (in this unit of work)
    are checked against every live ``segment_enter`` trigger of their workspace. Returns how many
    runs started; they commit with the change or not at all."""
    ids = sorted(set(contact_ids))
    started = 0
    for i in range(0, len(ids), CHANGED_CHUNK):
        started += await evaluate_segments(
            session, now=now, workspace_id=workspace_id, contact_ids=ids[i : i + CHANGED_CHUNK]
        )
    return started


async def _evaluate(
    session: WriteSession,
    funnel: Funnel,
    version: FunnelVersion,
    trigger: SegmentEnter,
    now: datetime,
    contact_ids: list[int] | None,
) -> int:
    ws = funnel.workspace_id
    key = trigger_key(trigger)
    if contact_ids is not None and not await _has_baseline(session, funnel.id, key):
        # A baseline of a few contacts would make everyone else an "entrant" on the next sweep.
        return await _evaluate(session, funnel, version, trigger, now, None)
    custom = await field_types(session, ws)
    matching_stmt = scoped_select(Contact, ws, Contact.id).where(
        Contact.deleted_at.is_(None),
        compile_sql(trigger.predicate, workspace_id=ws, now=now, custom=custom),
    )
    kept_stmt = select(SegmentMember.contact_id).where(
        SegmentMember.funnel_id == funnel.id, SegmentMember.trigger_key == key
    )
    if contact_ids is not None:
        matching_stmt = matching_stmt.where(Contact.id.in_(contact_ids))
        kept_stmt = kept_stmt.where(SegmentMember.contact_id.in_(contact_ids))
    matching = set(await session.scalars(matching_stmt))
    kept = set(await session.scalars(kept_stmt))
    gone = kept - matching
    if gone:
        await session.execute(
            delete(SegmentMember).where(
                SegmentMember.funnel_id == funnel.id,
                SegmentMember.trigger_key == key,
                SegmentMember.contact_id.in_(sorted(gone)),
            )
        )
    entrants = sorted(matching - kept)
    if not entrants:
        await _baseline_taken(session, funnel.id, key, now)
        return 0
    table = SegmentMember.__table__
    newly = list(
        await session.scalars(
            # Rows as parameters (executemany): the statement is cached, not compiled per call.
            insert(session, table).on_conflict_do_nothing().returning(table.c.contact_id),
            [
                {"funnel_id": funnel.id, "trigger_key": key, "contact_id": c, "since": now}
                for c in entrants
            ],
        )
    )
    if not await _baseline_taken(session, funnel.id, key, now):
        return 0  # the segment's first evaluation: these were members already
    started = 0
    for contact_id in sorted(newly):
        if await admit(session, version, contact_id, now, custom) and await enter(
            session, version=version, contact_id=contact_id, now=now
        ):
            started += 1
    return started


async def record_baselines(
    session: WriteSession, funnel: Funnel, version: FunnelVersion, now: datetime
) -> None:
    """At publish: who already matches each new ``segment_enter`` trigger did not enter it, so a
    contact changed a moment later is an entrant, not part of the first evaluation's baseline."""
    graph = graph_for_version(version.id, version.definition)
    for trigger in graph.definition.triggers:
        if isinstance(trigger, SegmentEnter) and not await _has_baseline(
            session, funnel.id, trigger_key(trigger)
        ):
            await _evaluate(session, funnel, version, trigger, now, None)


async def _has_baseline(session: WriteSession, funnel_id: int, key: str) -> bool:
    found = await session.scalar(
        select(TriggerFire.funnel_id).where(
            TriggerFire.funnel_id == funnel_id,
            TriggerFire.trigger_key == key,
            TriggerFire.contact_id == 0,
            TriggerFire.occurrence == BASELINE,
        )
    )
    return found is not None


async def _baseline_taken(session: WriteSession, funnel_id: int, key: str, now: datetime) -> bool:
    """True when this trigger was evaluated before; records the first evaluation otherwise."""
    inserted = await session.scalar(
        insert(session, TriggerFire)
        .values(
            funnel_id=funnel_id, trigger_key=key, contact_id=0, occurrence=BASELINE, fired_at=now
        )
        .on_conflict_do_nothing()
        .returning(TriggerFire.funnel_id)
    )
    return inserted is None
