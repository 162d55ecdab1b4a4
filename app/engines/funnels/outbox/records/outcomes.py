"""Recording a group of delivery outcomes in one transaction: each effect's status, a retry's due
time or a held message's, the delivery events, the frequency-cap slots given back, and the run of
a message that failed for good moved in the same transaction.

Each write is guarded by the lease (``lease_owner``) and the ``pending`` status, and only a row it
changed gets its delivery event: an effect cancelled or taken over meanwhile is left to whoever
holds it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sqlalchemy import insert as core_insert
from sqlalchemy import select, update

from app.db.column_arrays import ColumnArrays
from app.db.dialect import row_count
from app.db.lone_statement import write_alone
from app.db.session import Database, WriteSession
from app.engines.funnels.models import (
    OUTBOX_FAILED,
    OUTBOX_PENDING,
    OUTBOX_SENT,
    DeliveryEvent,
    OutboxEffect,
    Step,
)
from app.engines.funnels.outbox.due.retry import retry_at
from app.engines.funnels.outbox.states import OUTBOX
from app.engines.funnels.outbox.work import frequency
from app.engines.funnels.outbox.work.outcomes import Outcome
from app.engines.funnels.runs.work.effect_failures import after_failed_send, lock_runs_of
from app.settings import FunnelSettings

Unreserve = tuple[dict[int, frequency.Cap], list[frequency.Want], datetime]
"""The caps, the slots reserved for messages that did not go out, and when they were reserved."""

STEP_KEY = re.compile(r"^run-(\d+)-step-(\d+)$")

# A group of confirmed sends and nothing else, the common group, as one statement: the effects
# still ours (leased to this owner, still pending) are marked sent and each of them, only those,
# gets its delivery event. Written alone it is one round trip where a transaction takes four.
_SENT_ALONE = f"""
    WITH sent AS (
        UPDATE funnel_outbox SET {OUTBOX.set_sql(OUTBOX_SENT)}, finished_at = $3,
            lease_owner = NULL, last_error = NULL
        WHERE id = ANY($1::bigint[]) AND lease_owner = $2 AND {OUTBOX.where_keyed(OUTBOX_PENDING)}
        RETURNING id, workspace_id, contact_id
    )
    INSERT INTO delivery_events (workspace_id, outbox_id, contact_id, kind, detail, at)
    SELECT sent.workspace_id, sent.id, sent.contact_id, e.kind, e.detail, e.at
    FROM sent JOIN unnest($1::bigint[], $4::varchar[], $5::text[], $6::timestamptz[])
        AS e (id, kind, detail, at) ON e.id = sent.id
"""  # noqa: S608 - only the state machine's constants are interpolated


async def record(
    db: Database,
    settings: FunnelSettings,
    group: list[Outcome],
    owner: str,
    at: datetime,
    unreserve: Unreserve,
) -> None:
    """Record a group of outcomes in one transaction. The frequency-cap slots of messages that
    did not go out are given back in the same transaction."""
    sent = [o for o in group if o.status == OUTBOX_SENT]
    others = [o for o in group if o.status not in (None, OUTBOX_SENT) or o.retry or o.capped_until]
    caps, unsent, reserved_at = unreserve
    if not sent and not others and not unsent:
        return
    alone = not others and not unsent
    if alone and await write_alone(db, lambda: _sent_alone(sent, owner, at)) is not None:
        return
    async with db.write() as uow:
        session = uow.session
        failing = [
            o.effect.id
            for o in others
            if o.status == OUTBOX_FAILED
            or (o.retry and o.effect.attempts >= settings.max_send_attempts)
        ]
        if failing:
            # Their runs are locked first, in the order the runner locks (run, then its
            # effects), so moving a run cannot deadlock with a runner executing it.
            await lock_runs_of(session, failing)
        if unsent:
            await frequency.release(session, caps, unsent, reserved_at)
        recorded = await _sent(session, sent, owner, at) if sent else []
        for outcome in others:
            if outcome.retry:
                recorded += await _retry(session, settings, outcome, owner)
            elif outcome.capped_until is not None:
                recorded += await _hold(session, outcome, owner)
            else:
                recorded += await _finish(session, outcome, owner)
            if outcome.step_note and recorded and recorded[-1].effect is outcome.effect:
                await _note_step(session, outcome)
        if recorded:
            await _delivery_events(session, recorded)


async def _sent(
    session: WriteSession, sent: list[Outcome], owner: str, at: datetime
) -> list[Outcome]:
    """The confirmed sends, in one statement: those still ours are recorded ``sent``."""
    changed = set(
        await session.scalars(
            OUTBOX.transition(
                update(OutboxEffect).where(
                    OutboxEffect.id.in_([o.effect.id for o in sent]),
                    OutboxEffect.lease_owner == owner,
                ),
                OUTBOX_SENT,
                from_=(OUTBOX_PENDING,),
            )
            .values(finished_at=at, lease_owner=None, last_error=None)
            .returning(OutboxEffect.id)
            # The session holds no effects to bring up to date: skip the ORM's evaluation.
            .execution_options(synchronize_session=False)
        )
    )
    return [o for o in sent if o.effect.id in changed]


def _sent_alone(sent: list[Outcome], owner: str, at: datetime) -> ColumnArrays:
    return ColumnArrays(
        _SENT_ALONE,
        (
            [o.effect.id for o in sent],
            owner,
            at.astimezone(UTC),
            [o.kind for o in sent],
            [o.detail[:2000] for o in sent],
            [o.at.astimezone(UTC) for o in sent],
        ),
    )


async def _delivery_events(session: WriteSession, recorded: list[Outcome]) -> None:
    await session.execute(
        # Core insert of the table: several rows in one statement, no ORM flush.
        core_insert(DeliveryEvent.__table__),  # type: ignore[arg-type]
        [
            {
                "workspace_id": o.effect.workspace_id,
                "outbox_id": o.effect.id,
                "contact_id": o.effect.contact_id,
                "kind": o.kind,
                "detail": o.detail[:2000],
                "at": o.at,
            }
            for o in recorded
        ],
    )


async def _note_step(session: WriteSession, outcome: Outcome) -> None:
    """Record on the step that queued the message what the frequency cap did to it."""
    found = STEP_KEY.match(outcome.effect.idempotency_key)
    if found is None or outcome.step_note is None:
        return
    step = await session.scalar(
        select(Step).where(Step.run_id == int(found[1]), Step.seq == int(found[2]))
    )
    if step is None:
        return
    note = outcome.step_note
    step.output = {**(step.output or {}), "frequency_cap": note}
    said = "skipped" if note["action"] == "skipped" else f"waits until {note['until']}"
    step.decision = f"{step.decision}; frequency cap: {said}"[:200]


async def _hold(session: WriteSession, outcome: Outcome, owner: str) -> list[Outcome]:
    """A capped message that waits: due again when the cap allows, this try not counted."""
    result = await session.execute(
        update(OutboxEffect)
        .where(
            OutboxEffect.id == outcome.effect.id,
            OutboxEffect.lease_owner == owner,
            OUTBOX.keyed(OUTBOX_PENDING),
        )
        .values(
            next_attempt_at=outcome.capped_until,
            lease_owner=None,
            attempts=OutboxEffect.attempts - 1,
            last_error=outcome.detail[:2000],
        )
    )
    return [outcome] if row_count(result) else []


async def _retry(
    session: WriteSession, settings: FunnelSettings, outcome: Outcome, owner: str
) -> list[Outcome]:
    effect, error = outcome.effect, outcome.detail
    if effect.attempts >= settings.max_send_attempts:
        gave_up = Outcome(
            effect, "failed", outcome.at, OUTBOX_FAILED, "failed", f"gave up: {error}"
        )
        return await _finish(session, gave_up, owner)
    again = retry_at(
        outcome.at,
        attempts=effect.attempts,
        base_seconds=settings.retry_base_seconds,
        retry_after=outcome.retry_after,
    )
    await session.execute(
        update(OutboxEffect)
        .where(OutboxEffect.id == effect.id, OutboxEffect.lease_owner == owner)
        .values(next_attempt_at=again, lease_owner=None, last_error=error[:2000])
    )
    detail = f"{error} (retry at {again.isoformat()})"
    return [Outcome(effect, "deferred", outcome.at, kind="deferred", detail=detail)]


async def _finish(session: WriteSession, outcome: Outcome, owner: str) -> list[Outcome]:
    """Record a final status; a message that failed for good moves its run in the same
    transaction (it never stays ``completed``: :mod:`~app.engines.funnels.runs.work.effect_failures`)."""
    assert outcome.status is not None, "a final outcome names its status"
    result = await session.execute(
        OUTBOX.transition(
            update(OutboxEffect).where(
                OutboxEffect.id == outcome.effect.id,
                OutboxEffect.lease_owner == owner,
            ),
            outcome.status,
            from_=(OUTBOX_PENDING,),
        ).values(
            finished_at=outcome.at,
            lease_owner=None,
            last_error=outcome.detail[:2000],
        )
    )
    if not row_count(result):
        return []
    if outcome.status == OUTBOX_FAILED:
        await after_failed_send(
            session,
            outbox_id=outcome.effect.id,
            channel=outcome.effect.channel,
            error=outcome.detail,
            now=outcome.at,
        )
    return [outcome]
