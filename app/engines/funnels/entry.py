"""Creating runs: a contact enters a funnel's current version (FN-2, FN-3).

Uniqueness is the database's job: the insert is ``ON CONFLICT DO NOTHING`` against the unique
indexes on runs (one per contact per funnel; one *active* one for funnels open to re-entry), so
two triggers firing at the same instant create one run, whatever the interleaving (hard case 4).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.db.dialect import insert
from app.db.session import WriteSession
from app.engines.funnels.graph import graph_for_version
from app.engines.funnels.models import RUN_ACTIVE, Funnel, FunnelVersion, Run


async def enter(
    session: WriteSession,
    *,
    version: FunnelVersion,
    contact_id: int,
    now: datetime,
    context: dict[str, Any] | None = None,
) -> int | None:
    """Start a run of ``version`` for the contact; its id, or ``None`` when the contact may not
    enter (already in the funnel). The run is due at once: ``wake_at = now`` (FN-4)."""
    graph = graph_for_version(version.id, version.definition)
    if graph.entry is None:
        return None
    stmt = (
        insert(session, Run)
        .values(
            workspace_id=version.workspace_id,
            funnel_id=version.funnel_id,
            version_id=version.id,
            contact_id=contact_id,
            reentry=version.reentry,
            status=RUN_ACTIVE,
            current_node=graph.entry,
            wake_at=now,
            context=context or {},
            step_count=0,
            failures=0,
            entered_at=now,
            updated_at=now,
        )
        .on_conflict_do_nothing()
        .returning(Run.id)
    )
    run_id: int | None = await session.scalar(stmt)
    return run_id


async def enter_many(
    session: WriteSession, entries: list[tuple[FunnelVersion, int]], *, now: datetime
) -> int:
    """Start many runs in one statement (the trigger matcher's batch); returns how many started.
    Duplicates, within the batch or against existing runs, are dropped by the same indexes."""
    rows = []
    for version, contact_id in entries:
        graph = graph_for_version(version.id, version.definition)
        if graph.entry is None:
            continue
        rows.append(
            {
                "workspace_id": version.workspace_id,
                "funnel_id": version.funnel_id,
                "version_id": version.id,
                "contact_id": contact_id,
                "reentry": version.reentry,
                "status": RUN_ACTIVE,
                "current_node": graph.entry,
                "wake_at": now,
                "context": {},
                "step_count": 0,
                "failures": 0,
                "entered_at": now,
                "updated_at": now,
            }
        )
    if not rows:
        return 0
    created = await session.scalars(
        insert(session, Run).values(rows).on_conflict_do_nothing().returning(Run.id)
    )
    return len(list(created))


async def published_versions(
    session: WriteSession, workspace_ids: list[int], *, only_active: bool = True
) -> list[tuple[Funnel, FunnelVersion]]:
    """The current version of every (active) published funnel of these workspaces."""
    stmt = (
        select(Funnel, FunnelVersion)
        .join(FunnelVersion, FunnelVersion.id == Funnel.current_version_id)
        .where(Funnel.workspace_id.in_(workspace_ids))
    )
    if only_active:
        stmt = stmt.where(Funnel.active.is_(True))
    return [(f, v) for f, v in (await session.execute(stmt)).all()]
