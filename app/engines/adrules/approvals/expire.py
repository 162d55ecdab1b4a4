"""The expiry sweep (spec AR-28): proposals whose approval window ended are recorded ``expired``
and their records ``skipped`` with the reason; nothing is written. Approval already refuses an
expired proposal on its own (``expires_at > now`` in its claim), so the sweep only makes the
records say so."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select, update

from app.db.session import Database
from app.engines.adrules.approvals.decide import recount
from app.engines.adrules.notify_models import PROPOSAL_EXPIRED, PROPOSAL_PENDING, Proposal
from app.engines.adrules.proposal_states import PROPOSALS
from app.engines.adrules.record_states import RECORDS
from app.engines.adrules.run_models import RECORD_PROPOSED, RECORD_SKIPPED, ExecutionRecord
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep

log = logging.getLogger(__name__)

CHUNK = 500


async def expire_due(db: Database, now: datetime) -> int:
    """Record every pending proposal whose window ended by ``now`` as expired; returns how many."""
    total = 0
    while True:
        async with db.write() as uow:
            session = uow.session
            due = (
                select(Proposal.id)
                .where(Proposal.status == PROPOSAL_PENDING, Proposal.expires_at <= now)
                .limit(CHUNK)
            )
            expired = (
                await session.execute(
                    PROPOSALS.transition(
                        update(Proposal).where(Proposal.id.in_(due)),
                        PROPOSAL_EXPIRED,
                        from_=(PROPOSAL_PENDING,),
                    )
                    .values(
                        decided_at=now,
                        reason="the approval window ended before anyone approved",
                    )
                    .returning(
                        Proposal.batch_id,
                        Proposal.task_id,
                        Proposal.campaign_id,
                        Proposal.expires_at,
                    )
                )
            ).all()
            for batch_id, task_id, campaign_id, expires_at in expired:
                await session.execute(
                    RECORDS.transition(
                        update(ExecutionRecord).where(
                            ExecutionRecord.batch_id == batch_id,
                            ExecutionRecord.task_id == task_id,
                            ExecutionRecord.campaign_id == campaign_id,
                        ),
                        RECORD_SKIPPED,
                        from_=(RECORD_PROPOSED,),
                    ).values(
                        reason=f"not approved: the approval window ended at "
                        f"{expires_at:%Y-%m-%d %H:%M} UTC",
                    )
                )
            for batch_id in sorted({row[0] for row in expired}):
                await recount(session, batch_id)
        total += len(expired)
        if len(expired) < CHUNK:
            return total


async def expire_tick(ctx: JobContext, tick: datetime) -> None:
    expired = await expire_due(ctx.db, ctx.clock.now())
    if expired:
        log.info("ad rules proposals expired", extra={"proposals": expired})


EXPIRE_SWEEP = Sweep(name="adrules.proposals_expire", schedule=EVERY_10_SECONDS, run=expire_tick)
