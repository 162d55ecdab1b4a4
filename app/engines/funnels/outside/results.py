"""The results of delivered effects, and the wake-up of the run waiting for one.

A node whose output a later node needs (``http_request``, ``create_payment``, ``book_slot``,
``ai_generate``) cannot call out itself (FN-7): it writes its effect to the outbox and sleeps on
itself. The channel that delivers the effect records what came back here and makes the run due at
once; the node then runs again, reads the result into the run's context and moves on. A finished
effect that is delivered again (its deliverer died before marking it) is answered from here
without calling the provider a second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from app.db.dialect import insert
from app.db.session import Database, ReadSession, WriteSession
from app.engines.funnels.models import RUN_ACTIVE, OutboxEffect, Run
from app.engines.funnels.outside.models import EffectResult
from app.engines.funnels.runs.states import RUNS


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    result: dict[str, Any]
    error: str | None


async def recorded(db: Database, outbox_id: int) -> Outcome | None:
    async with db.read() as session:
        row = await session.get(EffectResult, outbox_id)
        return None if row is None else Outcome(row.ok, dict(row.result or {}), row.error)


async def record(
    db: Database,
    *,
    outbox_id: int,
    workspace_id: int,
    outcome: Outcome,
    run_id: int | None,
    node_id: str | None,
    now: datetime,
) -> None:
    """Keep the outcome (the first one wins) and wake the run if it still waits on this node."""
    async with db.write() as uow:
        await record_in(
            uow.session,
            outbox_id=outbox_id,
            workspace_id=workspace_id,
            outcome=outcome,
            run_id=run_id,
            node_id=node_id,
            now=now,
        )


async def record_in(
    session: WriteSession,
    *,
    outbox_id: int,
    workspace_id: int,
    outcome: Outcome,
    run_id: int | None,
    node_id: str | None,
    now: datetime,
) -> None:
    await session.execute(
        insert(session, EffectResult)
        .values(
            outbox_id=outbox_id,
            workspace_id=workspace_id,
            ok=outcome.ok,
            result=outcome.result,
            error=None if outcome.error is None else outcome.error[:2000],
            at=now,
        )
        .on_conflict_do_nothing()
    )
    if run_id is not None and node_id is not None:
        # Only a run that is asleep on this node: a leased run is being executed and will see
        # the result when it next wakes (its poll time at the latest).
        await session.execute(
            update(Run)
            .where(
                Run.id == run_id,
                RUNS.keyed(RUN_ACTIVE),
                Run.current_node == node_id,
                Run.lease_owner.is_(None),
            )
            .values(wake_at=now)
        )


@dataclass(frozen=True, slots=True)
class EffectState:
    """Where a node's effect stands, as the waiting node sees it."""

    status: str
    """The outbox row's status (``pending``, ``sent``, ``failed``, ``skipped``, ``cancelled``)."""
    outcome: Outcome | None
    last_error: str | None


async def effect_state(session: ReadSession | WriteSession, key: str) -> EffectState | None:
    row = (
        await session.execute(
            select(OutboxEffect.id, OutboxEffect.status, OutboxEffect.last_error).where(
                OutboxEffect.idempotency_key == key
            )
        )
    ).first()
    if row is None:
        return None
    result = await session.get(EffectResult, row.id)
    outcome = (
        None if result is None else Outcome(result.ok, dict(result.result or {}), result.error)
    )
    return EffectState(row.status, outcome, row.last_error)
