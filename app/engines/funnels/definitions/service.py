"""Funnels, drafts and immutable published versions (FN-1); reading runs, steps and timelines.

Services never commit: callers hold the unit of work.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import func, select

from app.db import keyset
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.memberships import names_of
from app.engines.funnels.contacts.saved_segments import bind
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions.graph import (
    Definition,
    decode_definition,
    encode_definition,
    kind_of,
)
from app.engines.funnels.definitions.problems import KnownNames, Problem
from app.engines.funnels.definitions.validate import validate
from app.engines.funnels.errors import FunnelNotFound, InvalidGraph, NotPublished
from app.engines.funnels.events.work.segment_triggers import record_baselines
from app.engines.funnels.models import (
    Contact,
    ContactEvent,
    ContactList,
    DeliveryEvent,
    Funnel,
    FunnelVersion,
    OutboxEffect,
    Run,
    Step,
    Tag,
)
from app.engines.funnels.outside.config import push_token_field
from app.engines.funnels.plugin import EXECUTORS
from app.errors import ValidationFailed
from app.platform import audit


def parse_definition(raw: Any) -> Definition:
    """Decode a definition, answering 422 with the failing field path."""
    try:
        return decode_definition(raw)
    except msgspec.ValidationError as exc:
        raise ValidationFailed.field("definition", str(exc)) from None


async def known_names(session: ReadSession, workspace_id: int) -> KnownNames:
    funnel_ids = await session.scalars(scoped_select(Funnel, workspace_id, Funnel.id))
    return KnownNames(
        tags=frozenset(await names_of(session, Tag, workspace_id)),
        lists=frozenset(await names_of(session, ContactList, workspace_id)),
        fields=await field_types(session, workspace_id),
        funnels=frozenset(funnel_ids),
        push_token_field=await push_token_field(session, workspace_id),
    )


def problems_to_dicts(problems: list[Problem]) -> list[dict[str, Any]]:
    return [
        {
            "node_id": p.node_id,
            "rule": p.rule,
            "code": p.code,
            "message": p.message,
            "field": p.field,
        }
        for p in problems
    ]


async def check(session: ReadSession, workspace_id: int, definition: Definition) -> list[Problem]:
    """The validator's problems plus what this server cannot execute yet."""
    problems = validate(definition, await known_names(session, workspace_id))
    runnable = EXECUTORS.keys()
    for node in definition.nodes:
        if kind_of(node) not in runnable:
            problems.append(
                Problem(
                    "FN-26",
                    "not_executable",
                    f"{kind_of(node)} nodes are valid but not executable on this server yet",
                    node.id,
                )
            )
    return problems


async def create_funnel(
    session: WriteSession, workspace_id: int, name: str, definition: Definition, now: datetime
) -> Funnel:
    if not name.strip():
        raise ValidationFailed.field("name", "must not be empty")
    funnel = Funnel(
        workspace_id=workspace_id,
        name=name.strip(),
        draft=await bind(session, workspace_id, encode_definition(definition)),
        active=True,
        created_at=now,
        updated_at=now,
    )
    session.add(funnel)
    await session.flush()
    return funnel


async def get_funnel(session: ReadSession, workspace_id: int, funnel_id: int) -> Funnel:
    funnel = await session.scalar(scoped_select(Funnel, workspace_id).where(Funnel.id == funnel_id))
    if funnel is None:
        raise FunnelNotFound(f"funnel {funnel_id} not found")
    return funnel


async def update_funnel(
    session: WriteSession,
    workspace_id: int,
    funnel_id: int,
    *,
    now: datetime,
    name: str | None = None,
    definition: Definition | None = None,
    active: bool | None = None,
) -> Funnel:
    """Edit the draft (never a published version) or switch the funnel on or off."""
    funnel = await get_funnel(session, workspace_id, funnel_id)
    if name is not None:
        if not name.strip():
            raise ValidationFailed.field("name", "must not be empty")
        funnel.name = name.strip()
    if definition is not None:
        # Saved segments the triggers and conditions refer to carry their conditions.
        funnel.draft = await bind(session, workspace_id, encode_definition(definition))
    switched = active is not None and active != funnel.active
    if active is not None:
        funnel.active = active
    funnel.updated_at = now
    await session.flush()
    if switched:
        action = "funnel.activated" if funnel.active else "funnel.paused"
        await _audit(session, action, funnel, now, after={"active": funnel.active})
    return funnel


async def _audit(
    session: WriteSession, action: str, funnel: Funnel, now: datetime, after: dict[str, object]
) -> None:
    await audit.record(
        session,
        action=action,
        object_type="funnel",
        object_id=funnel.id,
        workspace_id=funnel.workspace_id,
        after={"name": funnel.name, **after},
        now=now,
    )


async def publish(
    session: WriteSession, workspace_id: int, funnel_id: int, *, user_id: int | None, now: datetime
) -> FunnelVersion:
    """Freeze the draft as version n+1 (FN-1). Refused with every problem when invalid."""
    funnel = await get_funnel(session, workspace_id, funnel_id)
    # Lock the funnel row so two concurrent publishes number their versions one after the other.
    await session.execute(select(Funnel.id).where(Funnel.id == funnel.id).with_for_update())
    definition = parse_definition(funnel.draft)
    problems = await check(session, workspace_id, definition)
    if problems:
        raise InvalidGraph(problems_to_dicts(problems))
    number = (
        await session.scalar(
            select(func.coalesce(func.max(FunnelVersion.number), 0)).where(
                FunnelVersion.funnel_id == funnel.id
            )
        )
        or 0
    ) + 1
    version = FunnelVersion(
        funnel_id=funnel.id,
        workspace_id=workspace_id,
        number=number,
        definition=encode_definition(definition),
        reentry=definition.settings.reentry,
        published_at=now,
        published_by=user_id,
    )
    session.add(version)
    await session.flush()
    funnel.current_version_id = version.id
    funnel.updated_at = now
    await session.flush()
    await record_baselines(session, funnel, version, now)
    await _audit(session, "funnel.published", funnel, now, after={"version": number})
    return version


async def list_funnels(session: ReadSession, workspace_id: int) -> list[Funnel]:
    return list(await session.scalars(scoped_select(Funnel, workspace_id).order_by(Funnel.id)))


async def versions(session: ReadSession, workspace_id: int, funnel_id: int) -> list[FunnelVersion]:
    await get_funnel(session, workspace_id, funnel_id)
    return list(
        await session.scalars(
            select(FunnelVersion)
            .where(FunnelVersion.funnel_id == funnel_id)
            .order_by(FunnelVersion.number.desc())
        )
    )


async def get_version(
    session: ReadSession, workspace_id: int, funnel_id: int, number: int
) -> FunnelVersion:
    version = await session.scalar(
        scoped_select(FunnelVersion, workspace_id).where(
            FunnelVersion.funnel_id == funnel_id, FunnelVersion.number == number
        )
    )
    if version is None:
        raise FunnelNotFound(f"version {number} of funnel {funnel_id} not found")
    return version


async def current_version(session: ReadSession, funnel: Funnel) -> FunnelVersion:
    if funnel.current_version_id is None:
        raise NotPublished(f"funnel {funnel.id} has no published version")
    version = await session.get(FunnelVersion, funnel.current_version_id)
    assert version is not None
    return version


async def run_counts(session: ReadSession, funnel_ids: list[int]) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {f: {} for f in funnel_ids}
    if not funnel_ids:
        return counts
    rows = await session.execute(
        select(Run.funnel_id, Run.status, func.count())
        .where(Run.funnel_id.in_(funnel_ids))
        .group_by(Run.funnel_id, Run.status)
    )
    for fid, status, n in rows.all():
        counts[fid][status] = int(n)
    return counts


async def list_runs(
    session: ReadSession,
    workspace_id: int,
    funnel_id: int,
    *,
    after: int | None,
    limit: int,
    status: str | None = None,
) -> list[Run]:
    await get_funnel(session, workspace_id, funnel_id)
    stmt = scoped_select(Run, workspace_id).where(Run.funnel_id == funnel_id)
    if status:
        stmt = stmt.where(Run.status == status)
    if after is not None:
        stmt = stmt.where(keyset.after(Run.id, after))
    return list(await session.scalars(stmt.order_by(Run.id).limit(limit)))


async def get_run(session: ReadSession, workspace_id: int, run_id: int) -> Run:
    run = await session.scalar(scoped_select(Run, workspace_id).where(Run.id == run_id))
    if run is None:
        raise FunnelNotFound(f"run {run_id} not found")
    return run


async def steps_of(session: ReadSession, run_id: int) -> list[Step]:
    return list(
        await session.scalars(select(Step).where(Step.run_id == run_id).order_by(Step.seq, Step.id))
    )


async def effects_of_run(session: ReadSession, run_id: int) -> list[OutboxEffect]:
    return list(
        await session.scalars(
            select(OutboxEffect).where(OutboxEffect.run_id == run_id).order_by(OutboxEffect.id)
        )
    )


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    at: datetime
    kind: str
    """``event``, ``step``, ``message`` or ``delivery``."""
    title: str
    detail: str
    run_id: int | None = None


async def timeline(
    session: ReadSession, workspace_id: int, contact_id: int, *, limit: int = 200
) -> tuple[Contact, list[TimelineEntry]]:
    """Everything that happened to one contact, newest first: events, steps of its runs,
    messages and their delivery record."""
    contact = await get_contact(session, workspace_id, contact_id)
    entries: list[TimelineEntry] = []
    for ev in await session.scalars(
        select(ContactEvent)
        .where(ContactEvent.contact_id == contact_id)
        .order_by(ContactEvent.id.desc())
        .limit(limit)
    ):
        props = ", ".join(f"{k}={v}" for k, v in (ev.properties or {}).items())
        entries.append(TimelineEntry(ev.occurred_at, "event", ev.name, props))
    step_rows = await session.execute(
        select(Step, Funnel.name)
        .join(Run, Run.id == Step.run_id)
        .join(Funnel, Funnel.id == Run.funnel_id)
        .where(Run.contact_id == contact_id)
        .order_by(Step.id.desc())
        .limit(limit)
    )
    for step, funnel_name in step_rows.all():
        entries.append(
            TimelineEntry(
                step.at,
                "step",
                f"{funnel_name}: {step.kind} {step.node_id}",
                step.decision,
                step.run_id,
            )
        )
    for d in await session.scalars(
        select(DeliveryEvent)
        .where(DeliveryEvent.contact_id == contact_id)
        .order_by(DeliveryEvent.id.desc())
        .limit(limit)
    ):
        entries.append(TimelineEntry(d.at, "delivery", d.kind, d.detail))
    entries.sort(key=lambda e: e.at, reverse=True)
    return contact, entries[:limit]
