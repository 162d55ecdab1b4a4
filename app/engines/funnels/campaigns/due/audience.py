"""A campaign's audience snapshot (FN-28), taken in bounded chunks.

The snapshot is claimed **once**: a conditional ``UPDATE … WHERE materialised_at IS NULL`` fixes
its time and the highest contact id it can include, and turns the campaign ``materialising``.
Recipients are then inserted in contact-id order, numbered ``1…n``, a chunk at a time: each
chunk is its own short transaction that also records where the next one starts, so a large
audience never holds the SQLite write lock for long and a crash resumes after the last committed
chunk (a recipient is inserted with its chunk or not at all). The first chunk is taken with the
claim, so an audience of up to one chunk starts sending at once; a larger one continues as a
bulk job (progress under ``/api/v1/jobs`` and on the campaign's page). The chunk that finds no
more contacts turns the campaign ``sending``.

Every chunk evaluates the audience's predicate at the snapshot's time and only over contacts that
existed when it was claimed, so contacts who join while it is taken are not added, as they are
not added during the send; whether a contact still may be mailed is checked at send time anyway
(FN-30).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select, update

from app.db.dialect import insert
from app.db.session import UnitOfWork, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.campaigns.models import (
    DRAFT,
    MATERIALISING,
    R_PENDING,
    SCHEDULED,
    SENDING,
    Campaign,
    Recipient,
)
from app.engines.funnels.campaigns.recipient_states import RECIPIENTS
from app.engines.funnels.campaigns.service import checked_audience
from app.engines.funnels.campaigns.states import CAMPAIGNS
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import compile_sql, decode_predicate
from app.engines.funnels.experiments.campaign_holdout import held_back
from app.engines.funnels.models import Contact
from app.errors import Conflict
from app.scheduling.bulk import BulkKind, Chunk, StepInput, bulk_job_spec, submit
from app.scheduling.queue import JobQueue

WHOLE = 1_000_000_000
"""Chunk size of :func:`materialise`, which takes the whole audience in its caller's
transaction."""


class AlreadyMaterialised(Conflict):
    code = "audience_already_materialised"


@dataclass(frozen=True, slots=True)
class Cursor:
    after: int = 0
    """The last contact id taken."""
    seq: int = 0
    """Recipients numbered so far."""


async def _claim(session: WriteSession, campaign_id: int, now: datetime) -> Campaign:
    # A draft is snapshotted when the API is asked to send it now, a scheduled campaign by the
    # sweep; a campaign cancelled before its snapshot keeps its state.
    claimed = await session.scalar(
        CAMPAIGNS.transition(
            update(Campaign).where(Campaign.id == campaign_id, Campaign.materialised_at.is_(None)),
            MATERIALISING,
            from_=(DRAFT, SCHEDULED),
        )
        .values(materialised_at=now, started_at=now, updated_at=now)
        .returning(Campaign.id)
    )
    if claimed is None:
        raise AlreadyMaterialised(f"the audience of campaign {campaign_id} is already fixed")
    campaign = await session.get(Campaign, campaign_id, populate_existing=True)
    assert campaign is not None
    return campaign


async def _highest_contact(session: WriteSession, workspace_id: int) -> int:
    return int(
        await session.scalar(
            scoped_select(Contact, workspace_id, func.coalesce(func.max(Contact.id), 0))
        )
        or 0
    )


async def _conditions(session: WriteSession, campaign: Campaign, upto: int) -> list[Any]:
    assert campaign.materialised_at is not None
    conditions: list[Any] = [
        Contact.workspace_id == campaign.workspace_id,
        Contact.deleted_at.is_(None),
        Contact.email.is_not(None),
        Contact.id <= upto,
    ]
    if campaign.audience is not None:
        predicate = decode_predicate(campaign.audience)
        custom = await field_types(session, campaign.workspace_id)
        conditions.append(
            compile_sql(
                predicate,
                workspace_id=campaign.workspace_id,
                now=campaign.materialised_at,
                custom=custom,
            )
        )
    return conditions


async def _chunk(
    session: WriteSession,
    campaign: Campaign,
    cursor: Cursor,
    *,
    upto: int,
    limit: int,
    now: datetime,
) -> tuple[Cursor, int, bool]:
    """Insert the next ``limit`` recipients; ``(new cursor, inserted, finished)``. The chunk
    that finds the audience exhausted starts the send."""
    conditions = await _conditions(session, campaign, upto)
    ids = list(
        await session.scalars(
            select(Contact.id)
            .where(and_(*conditions), Contact.id > cursor.after)
            .order_by(Contact.id)
            .limit(limit)
        )
    )
    if ids:
        pending = RECIPIENTS.create(R_PENDING)
        await session.execute(
            insert(session, Recipient),
            [
                {
                    "campaign_id": campaign.id,
                    "seq": cursor.seq + n,
                    "contact_id": contact_id,
                    **pending,
                    "detail": None,
                }
                | held_back(campaign, contact_id)
                for n, contact_id in enumerate(ids, start=1)
            ],
        )
    moved = Cursor(after=ids[-1] if ids else cursor.after, seq=cursor.seq + len(ids))
    finished = len(ids) < limit
    stmt = update(Campaign).where(Campaign.id == campaign.id)
    # The chunk that finds the audience exhausted starts the send; the others only count.
    stmt = (
        CAMPAIGNS.transition(stmt, SENDING, from_=(MATERIALISING,))
        if finished
        else stmt.where(Campaign.status == MATERIALISING)
    )
    await session.execute(stmt.values(audience_size=moved.seq, updated_at=now))
    return moved, len(ids), finished


async def audience_step(session: WriteSession, step: StepInput) -> Chunk:
    """One chunk of a snapshot's bulk job."""
    params = step.job.params
    cursor = Cursor(
        after=int(step.job.cursor.get("after", params["after"])),
        seq=int(step.job.cursor.get("seq", params["seq"])),
    )
    campaign = await session.scalar(
        select(Campaign).where(Campaign.id == int(params["campaign_id"])).with_for_update()
    )
    if campaign is None or campaign.status != MATERIALISING:
        # Cancelled (or deleted) while its audience was being taken: nothing more to add.
        return Chunk({"after": cursor.after, "seq": cursor.seq}, 0, True)
    moved, inserted, finished = await _chunk(
        session, campaign, cursor, upto=int(params["upto"]), limit=step.limit, now=step.now
    )
    return Chunk(
        {"after": moved.after, "seq": moved.seq},
        inserted,
        finished,
        counters={"recipients": inserted},
    )


AUDIENCE = BulkKind("funnels.campaign_audience", audience_step, title="Audience snapshot")
AUDIENCE_JOB = bulk_job_spec(AUDIENCE)


async def start_materialising(
    uow: UnitOfWork, queue: JobQueue, campaign_id: int, now: datetime, *, chunk_items: int
) -> Campaign:
    """Claim the snapshot and take its first chunk in ``uow``; queue the rest as a bulk job
    when there is more. The campaign is ``sending`` at once for an audience of up to one chunk,
    ``materialising`` (with ``audience_job_id``) otherwise.

    Raises:
        AlreadyMaterialised: the audience was snapshotted before (never done twice).
        ValidationFailed: the stored audience breaks a rule against the workspace's fields
            (stored before audiences were checked); the claim is rolled back with ``uow``.
    """
    session = uow.session
    campaign = await _claim(session, campaign_id, now)
    await checked_audience(session, campaign.workspace_id, campaign.audience)
    upto = await _highest_contact(session, campaign.workspace_id)
    cursor, _, finished = await _chunk(
        session, campaign, Cursor(), upto=upto, limit=chunk_items, now=now
    )
    if not finished:
        job = await submit(
            uow,
            queue,
            AUDIENCE_JOB,
            workspace_id=campaign.workspace_id,
            kind=AUDIENCE,
            now=now,
            params={
                "campaign_id": campaign.id,
                "upto": upto,
                "after": cursor.after,
                "seq": cursor.seq,
            },
            total=await _estimate(session, campaign, upto),
        )
        job.processed = cursor.seq  # the first chunk, taken with the claim
        await session.execute(
            update(Campaign).where(Campaign.id == campaign.id).values(audience_job_id=job.id)
        )
    await session.refresh(campaign)
    return campaign


async def _estimate(session: WriteSession, campaign: Campaign, upto: int) -> int:
    """How many recipients the snapshot will have, for its progress (contacts may still change
    until their chunk is taken)."""
    conditions = await _conditions(session, campaign, upto)
    return int(
        await session.scalar(select(func.count()).select_from(Contact).where(and_(*conditions)))
        or 0
    )


async def materialise(session: WriteSession, campaign_id: int, now: datetime) -> int:
    """The whole snapshot in the caller's transaction; returns the number of recipients. For
    small audiences only (the demo's, direct engine calls): the API and the sweep use
    :func:`start_materialising`, which bounds every transaction.

    Raises:
        AlreadyMaterialised: the audience was snapshotted before.
    """
    campaign = await _claim(session, campaign_id, now)
    upto = await _highest_contact(session, campaign.workspace_id)
    cursor, _, _ = await _chunk(session, campaign, Cursor(), upto=upto, limit=WHOLE, now=now)
    return cursor.seq
