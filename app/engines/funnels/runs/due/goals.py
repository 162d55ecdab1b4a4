"""The goal watcher (FN-18): contacts in a funnel who meet a goal's condition jump to the goal,
and what is still pending for their run is cancelled, for them alone.

The runner also checks goals whenever a run wakes; this sweep catches the runs that are asleep
(in a long wait) so that nobody gets "we miss you" the day after they came back. A run leased
by a worker is left to that worker, which checks goals itself.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.db.session import Database, WriteSession
from app.db.tenancy import scoped_select, scoped_update
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import compile_sql
from app.engines.funnels.definitions.graph import Goal, graph_for_version
from app.engines.funnels.models import Contact, FunnelVersion, Run
from app.engines.funnels.outbox.due.cancel import cancel_pending_effects
from app.engines.funnels.runs.states import RUN_ACTIVE


async def watch_goals(db: Database, *, now: datetime, limit: int = 1000) -> int:
    """Move runs whose contact meets a goal condition to that goal; returns how many moved."""
    moved = 0
    async with db.write() as uow:
        session = uow.session
        for version in await _versions_with_active_runs(session):
            graph = graph_for_version(version.id, version.definition)
            goals = [g for g in graph.goals if g.predicate is not None]
            if not goals:
                continue
            custom = await field_types(session, version.workspace_id)
            for goal in goals:
                moved += await _move_to_goal(session, version, goal, custom, now=now, limit=limit)
    return moved


async def _versions_with_active_runs(session: WriteSession) -> list[FunnelVersion]:
    """Every version, in any workspace, that has an active run: the sweep's reach."""
    version_ids = list(
        await session.scalars(select(Run.version_id).where(Run.status == RUN_ACTIVE).distinct())
    )
    if not version_ids:
        return []
    return list(
        await session.scalars(select(FunnelVersion).where(FunnelVersion.id.in_(version_ids)))
    )


async def _move_to_goal(
    session: WriteSession,
    version: FunnelVersion,
    goal: Goal,
    custom: dict[str, str],
    *,
    now: datetime,
    limit: int,
) -> int:
    """Move the version's sleeping runs whose contact meets ``goal`` to it; how many moved."""
    assert goal.predicate is not None
    ws = version.workspace_id
    matches = compile_sql(goal.predicate, workspace_id=ws, now=now, custom=custom)
    run_ids = list(
        await session.scalars(
            scoped_select(Run, ws, Run.id)
            .join(Contact, Contact.id == Run.contact_id)
            .where(
                Run.version_id == version.id,
                Run.status == RUN_ACTIVE,
                Run.lease_owner.is_(None),
                Run.current_node != goal.id,
                matches,
            )
            .limit(limit)
        )
    )
    if not run_ids:
        return 0
    await session.execute(
        scoped_update(Run, ws)
        .execution_options(synchronize_session=False)
        .where(Run.id.in_(run_ids), Run.lease_owner.is_(None))
        .values(
            current_node=goal.id,
            wake_at=now,
            waiting_event=None,
            woken_by=None,
            updated_at=now,
        )
    )
    for run_id in run_ids:
        await cancel_pending_effects(session, now, reason=f"goal:{goal.id}", run_id=run_id)
    return len(run_ids)
