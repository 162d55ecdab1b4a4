"""The ``manual`` trigger for many contacts, in bounded chunks (issue 11 item 4).

Entering everyone a predicate matches in one transaction would hold the SQLite write lock for as
long as a large workspace takes. :func:`start_enrolment` enters the first chunk (contacts in id
order) in the request's transaction and, when more remain, queues the rest as the
``funnels.enrolment`` bulk job: each chunk enters the next contacts after the cursor and records
the cursor in the same transaction, so a crash resumes after the last committed chunk and a run
is started with its chunk or not at all (the unique indexes drop anyone already in). Predicates
are evaluated at the request's time and only over contacts that existed then, as a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import func, select

from app.db.session import UnitOfWork, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.segments import Predicate, decode_predicate
from app.engines.funnels.events.claim.triggers import enrolment_query, enter_ids
from app.engines.funnels.models import Contact, FunnelVersion
from app.scheduling.bulk import BulkKind, Chunk, StepInput, bulk_job_spec, submit
from app.scheduling.bulk_models import BulkJob
from app.scheduling.queue import JobQueue


@dataclass(frozen=True, slots=True)
class Enrolment:
    started: int
    """Runs started so far (by the first chunk when a job continues)."""
    job: BulkJob | None
    """The bulk job entering the rest (``None``: everyone entered at once)."""


async def _chunk(
    session: WriteSession,
    version: FunnelVersion,
    *,
    at: datetime,
    now: datetime,
    contact_ids: Sequence[int] | None,
    predicate: Predicate | None,
    after: int,
    upto: int,
    limit: int,
) -> tuple[int, int, int, bool]:
    """Enter the next ``limit`` contacts after ``after``: ``(started, considered, last id,
    finished)``."""
    stmt = await enrolment_query(
        session, version, at=at, contact_ids=contact_ids, predicate=predicate
    )
    ids = list(
        await session.scalars(
            stmt.where(Contact.id > after, Contact.id <= upto).order_by(Contact.id).limit(limit)
        )
    )
    started = await enter_ids(session, version, ids, now=now)
    return started, len(ids), ids[-1] if ids else after, len(ids) < limit


async def enrolment_step(session: WriteSession, step: StepInput) -> Chunk:
    params = step.job.params
    after = int(step.job.cursor.get("after", params["after"]))
    version = await session.get(FunnelVersion, int(params["version_id"]))
    if version is None:
        return Chunk({"after": after}, 0, True)
    raw = params.get("predicate")
    ids = params.get("contact_ids")
    started, considered, last, finished = await _chunk(
        session,
        version,
        at=datetime.fromisoformat(str(params["at"])),
        now=step.now,
        contact_ids=None if ids is None else [int(i) for i in ids],
        predicate=None if raw is None else decode_predicate(raw),
        after=after,
        upto=int(params["upto"]),
        limit=step.limit,
    )
    return Chunk({"after": last}, considered, finished, counters={"started": started})


ENROLMENT = BulkKind("funnels.enrolment", enrolment_step, title="Enrolment")
ENROLMENT_JOB = bulk_job_spec(ENROLMENT)


async def start_enrolment(
    uow: UnitOfWork,
    queue: JobQueue,
    version: FunnelVersion,
    *,
    now: datetime,
    contact_ids: Sequence[int] | None,
    predicate: Predicate | None,
    chunk_items: int,
) -> Enrolment:
    """Enter the first chunk in ``uow``; queue the rest as a bulk job when there is more."""
    session = uow.session
    upto = int(
        await session.scalar(
            scoped_select(Contact, version.workspace_id, func.coalesce(func.max(Contact.id), 0))
        )
        or 0
    )
    started, considered, last, finished = await _chunk(
        session,
        version,
        at=now,
        now=now,
        contact_ids=contact_ids,
        predicate=predicate,
        after=0,
        upto=upto,
        limit=chunk_items,
    )
    if finished:
        return Enrolment(started, None)
    stmt = await enrolment_query(
        session, version, at=now, contact_ids=contact_ids, predicate=predicate
    )
    # The count of a statement that is scoped already (``enrolment_query``).
    matching = stmt.where(Contact.id <= upto).subquery()
    total = await session.scalar(select(func.count()).select_from(matching))
    params: dict[str, Any] = {
        "version_id": version.id,
        "contact_ids": None if contact_ids is None else list(contact_ids),
        "predicate": None if predicate is None else msgspec.to_builtins(predicate),
        "at": now.isoformat(),
        "after": last,
        "upto": upto,
    }
    job = await submit(
        uow,
        queue,
        ENROLMENT_JOB,
        workspace_id=version.workspace_id,
        kind=ENROLMENT,
        now=now,
        params=params,
        total=int(total or 0),
    )
    job.processed = considered
    job.counters = {"started": started}
    return Enrolment(started, job)
