"""What a run does when one of its effects cannot go out: it never ends ``completed`` as if the
message had been sent.

Every node with an outside effect (the sends, ``notify_team``, ``http_request``,
``create_payment``, ``book_slot``, ``ai_generate``) may name an ``on_failure`` node:

- **with** ``on_failure`` the run continues there (a fallback channel, a note to the team);
- **without** it the run ends ``failed``, its ``exit_reason`` ``<channel>_failed`` and the error
  in ``last_error``, standing on the node that failed (so the funnel report counts it as ended
  there, and the funnel status counts it as failed).

An effect fails in one of three places, all handled the same way:

1. **when the node runs** — the contact lacks what the channel needs (no e-mail address, no
   phone, no push token, an incomplete postal address: :mod:`.channel_fields`): nothing is
   queued (:func:`cannot_go_out`);
2. **when a request's answer is read** — ``http_request`` and the other nodes that wait for their
   effect see it failed on their next wake;
3. **at send time** — a message queued earlier is refused for good by the provider or runs out of
   retries while the run waits further on, or after the run reached the end of the graph. The
   deliverer then moves the run in the same transaction that marks the effect failed
   (:func:`after_failed_send`): a waiting run takes the branch (its wait and pending effects
   cancelled, as a goal does) or fails; a run that had completed takes the branch or becomes
   ``failed``. Runs that ended otherwise (a goal, an exit, a deletion) are left as they are.

Skipped messages are not failures: a suppressed contact, withdrawn consent or the frequency cap
are decisions, recorded on the step and the delivery events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.exc import IntegrityError

from app.db.dialect import insert
from app.db.session import WriteSession
from app.db.tenancy import scoped_exists, scoped_select, scoped_update
from app.engines.funnels.definitions.graph import Node, graph_for_version, kind_of
from app.engines.funnels.models import FunnelVersion, OutboxEffect, Run, Step
from app.engines.funnels.outbox.due.cancel import cancel_pending_effects
from app.engines.funnels.runs.states import RUN_ACTIVE, RUN_COMPLETED, RUN_FAILED, RUNS
from app.engines.funnels.runs.work.nodes.base import End, Next, Outcome

SEND_CHANNELS = frozenset({"email", "sms", "push", "letter", "team"})
"""Channels whose effect the run does not wait for (the run is elsewhere when it fails). The
request channels (``http``, ``payment``, ``booking``, ``ai``) are read by their own node."""


def failure_reason(channel: str) -> str:
    return f"{channel}_failed"


def cannot_go_out(
    node: Node, channel: str, error: str, output: dict[str, Any] | None = None
) -> Outcome:
    """The outcome of a node whose effect cannot be carried out: its failure branch, or the end
    of the run as ``failed``."""
    target = getattr(node, "on_failure", None)
    shown = {**(output or {}), "error": error}
    if target:
        return Next(target, f"failed: {error}; continues at {target}"[:200], shown)
    return End(RUN_FAILED, failure_reason(channel), f"failed: {error}"[:200], shown, error[:2000])


async def after_failed_send(
    session: WriteSession, *, outbox_id: int, channel: str, error: str, now: datetime
) -> str | None:
    """Move the run of a message that failed for good (see the module's third case). Called in
    the transaction that marks the effect failed; returns what became of the run, if anything."""
    if channel not in SEND_CHANNELS:
        return None
    effect = await _failed_effect(session, outbox_id)
    if effect is None or effect.run_id is None:
        return None  # a test send, or a run deleted since
    run = await _locked_run(session, effect.workspace_id, effect.run_id)
    if run is None:
        return None
    ended_normally = run.status == RUN_COMPLETED and run.exit_reason == "completed"
    if run.status != RUN_ACTIVE and not ended_normally:
        return None
    node = await _node_of(session, run, effect.node_id)
    target = getattr(node, "on_failure", None) if node is not None else None
    if target and ended_normally and await _active_elsewhere(session, run):
        target = None  # the contact entered the funnel again meanwhile: one active run only
    seq = run.step_count + 1
    await cancel_pending_effects(
        session, now, reason=f"run {'branched' if target else 'failed'}", run_id=run.id
    )
    context = {k: v for k, v in dict(run.context or {}).items() if k not in ("wait", "outside")}
    if target and not await _reopen(session, run, target, context, seq, now):
        target = None
    if not target:
        await _fail(session, run, effect.node_id, context, seq, failure_reason(channel), error, now)
    said = f"continues at {target}" if target else "the run failed"
    await session.execute(
        insert(session, Step).values(
            run_id=run.id,
            seq=seq,
            node_id=effect.node_id,
            kind=kind_of(node) if node is not None else channel,
            decision=f"not delivered: {error}; {said}"[:200],
            output={
                "effect": effect.idempotency_key,
                "error": error[:500],
                **({"on_failure": target} if target else {}),
            },
            at=now,
        )
    )
    return said


async def lock_runs_of(session: WriteSession, outbox_ids: list[int]) -> None:
    """Lock the runs of these effects (PostgreSQL; SQLite's writer lock covers it already)."""
    await session.execute(
        select(Run.id)
        .where(
            Run.id.in_(
                select(OutboxEffect.run_id).where(
                    OutboxEffect.id.in_(outbox_ids), OutboxEffect.run_id.is_not(None)
                )
            )
        )
        .order_by(Run.id)
        .with_for_update()
    )


async def _failed_effect(
    session: WriteSession, outbox_id: int
) -> Row[int, int | None, str, str] | None:
    """The failed effect's workspace, run, node and key (its delivery is the caller's claim)."""
    return (
        await session.execute(
            select(
                OutboxEffect.workspace_id,
                OutboxEffect.run_id,
                OutboxEffect.node_id,
                OutboxEffect.idempotency_key,
            ).where(OutboxEffect.id == outbox_id)
        )
    ).first()


async def _locked_run(session: WriteSession, workspace_id: int, run_id: int) -> Row[Any] | None:
    return (
        await session.execute(
            scoped_select(
                Run,
                workspace_id,
                Run.id,
                Run.workspace_id,
                Run.status,
                Run.exit_reason,
                Run.version_id,
                Run.funnel_id,
                Run.contact_id,
                Run.context,
                Run.step_count,
            )
            .where(Run.id == run_id)
            # Waits for a runner executing this run, then sees what it committed.
            .with_for_update()
        )
    ).first()


async def _node_of(session: WriteSession, run: Row[Any], node_id: str) -> Node | None:
    """The node of the run's version the effect was emitted by."""
    definition = await session.scalar(
        scoped_select(FunnelVersion, run.workspace_id, FunnelVersion.definition).where(
            FunnelVersion.id == run.version_id
        )
    )
    return graph_for_version(run.version_id, definition or {}).node(node_id)


async def _active_elsewhere(session: WriteSession, run: Row[Any]) -> bool:
    return bool(
        await session.scalar(
            select(
                scoped_exists(
                    Run,
                    run.workspace_id,
                    Run.funnel_id == run.funnel_id,
                    Run.contact_id == run.contact_id,
                    Run.status == RUN_ACTIVE,
                )
            )
        )
    )


async def _reopen(
    session: WriteSession,
    run: Row[Any],
    target: str,
    context: dict[str, Any],
    seq: int,
    now: datetime,
) -> bool:
    """The run continues at its failure branch, due at once; ``False`` when the one-active-run
    index refused it (a new run of the contact started at that very moment)."""
    statement = scoped_update(Run, run.workspace_id).where(Run.id == run.id)
    if run.status != RUN_ACTIVE:
        # A completed run becomes active again; a waiting one only changes its node.
        statement = RUNS.transition(statement, RUN_ACTIVE, from_=(run.status,))
    try:
        async with session.begin_nested():
            await session.execute(
                statement.values(
                    current_node=target,
                    context=context,
                    waiting_event=None,
                    woken_by=None,
                    wake_at=now,
                    step_count=seq,
                    ended_at=None,
                    exit_reason=None,
                    updated_at=now,
                )
            )
    except IntegrityError:
        return False
    return True


async def _fail(
    session: WriteSession,
    run: Row[Any],
    node_id: str,
    context: dict[str, Any],
    seq: int,
    reason: str,
    error: str,
    now: datetime,
) -> None:
    """The run ends ``failed``, standing on the node whose effect failed."""
    await session.execute(
        RUNS.transition(
            scoped_update(Run, run.workspace_id).where(Run.id == run.id),
            RUN_FAILED,
            from_=(run.status,),
        ).values(
            current_node=node_id,
            context=context,
            waiting_event=None,
            woken_by=None,
            step_count=seq,
            exit_reason=reason,
            last_error=error[:2000],
            ended_at=now,
            updated_at=now,
            lease_owner=None,
            lease_until=None,
        )
    )
