"""Claiming due runs exactly once (FN-5, FN-9), and the fence a batch passes before its work.

The lease is one statement of the shared claim primitive (:mod:`app.scheduling.claim`): up to
``limit`` due runs, oldest ``wake_at`` first, skipping rows other workers hold. It writes the owner
and the expiry and moves ``wake_at`` to that expiry, so a run whose worker died is simply due again
when the lease runs out; no separate recovery pass.

The work on a leased batch starts by locking its runs again and keeping only those the worker
still holds (:func:`held_runs`): a worker that lost a lease writes nothing for that run.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Table, select

from app.db.dialect import one_of
from app.db.session import Database, WriteSession
from app.engines.funnels.models import Run
from app.engines.funnels.runs.states import RUN_ACTIVE, RUNS
from app.engines.funnels.runs.work.nodes.base import RunState
from app.scheduling.claim import Claim

LEASE = Claim(
    table=cast(Table, Run.__table__),
    due=f"{RUNS.where(RUN_ACTIVE)} AND wake_at <= :now",
    order_by="wake_at",
    returning=("id",),
    owner="lease_owner",
    expires="lease_until",
    # The run is due again by itself when the lease runs out (FN-9).
    sets={"wake_at": ":expires"},
)


async def lease_runs(
    db: Database, *, owner: str, now: datetime, limit: int, lease_seconds: int
) -> list[int]:
    """Claim up to ``limit`` due runs for ``owner`` (FN-5); returns their ids."""
    rows = await LEASE.take(db, now=now, limit=limit, owner=owner, lease_seconds=lease_seconds)
    return [int(r[0]) for r in rows]


_RUN_COLUMNS = (
    Run.id,
    Run.workspace_id,
    Run.funnel_id,
    Run.version_id,
    Run.contact_id,
    Run.current_node,
    Run.context,
    Run.step_count,
    Run.waiting_event,
    Run.woken_by,
    Run.failures,
)


async def held_runs(session: WriteSession, ids: Sequence[int], owner: str) -> list[RunState]:
    """The batch's runs this owner still holds (locked), as the executors' run states; a run
    whose lease another owner took since is left out (fenced)."""
    rows = (
        await session.execute(
            select(*_RUN_COLUMNS)
            .where(one_of(session, Run.id, ids), Run.lease_owner == owner, RUNS.keyed(RUN_ACTIVE))
            .order_by(Run.id)
            .with_for_update()
        )
    ).all()
    # Unpacked in the order of _RUN_COLUMNS: a row's fields read by name cost a lookup each,
    # eleven a run on the runner's hot path.
    return [
        RunState(
            rid, ws, funnel, version, contact, node, dict(ctx or {}), steps, waits, woken, fails
        )
        for rid, ws, funnel, version, contact, node, ctx, steps, waits, woken, fails in rows
    ]
