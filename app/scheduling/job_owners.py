"""Which workspace a queue job works for: the one home of the jobs' tenancy.

A job's spec says how to find its workspace from its payload (:class:`~app.scheduling.jobs.OwnedBy`);
a spec without one makes a platform job (the sweeps' shards, the ingest), which only the
instance's operators see. The owner is looked up once a job is dead (:func:`settle_owners`, before
dead jobs are read) and stored on the row, so lists filter by a column; the hot path of a job
that succeeds never looks it up. :func:`visible_to` is the filter every read of jobs for a person
or an API key goes through.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, select, true, update

from app.db.session import Database, ReadSession
from app.scheduling.jobs import JobRegistry
from app.scheduling.models import ENDED_ROWS, Job, in_index

log = logging.getLogger(__name__)

SETTLE_BATCH = 200


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who reads jobs: a workspace's admin (its jobs), or an instance operator (every job)."""

    workspace_id: int
    operator: bool = False


def visible_to(viewer: Viewer) -> ColumnElement[bool]:
    """The jobs ``viewer`` may see: an operator every job, anyone else their workspace's."""
    if viewer.operator:
        return true()
    return Job.workspace_id == viewer.workspace_id


def scoped(statement: Select[Any], viewer: Viewer) -> Select[Any]:
    return statement.where(visible_to(viewer))


async def owner_of(session: ReadSession, registry: JobRegistry, job: Job) -> int | None:
    """The workspace ``job`` works for, from its payload; None for a platform job, a job no
    process here knows, or a payload that no longer decodes or names nothing."""
    spec = registry.specs.get(job.name)
    if spec is None or spec.owner is None:
        return None
    try:
        value = getattr(spec.decode(bytes(job.payload)), spec.owner.field)
    except Exception:
        log.warning("job %s: its payload does not name its workspace", job.id)
        return None
    model = spec.owner.model
    if model is None:
        return int(value)
    found = await session.scalar(select(model.workspace_id).where(model.id == value))
    return None if found is None else int(found)


UNSETTLED = select(Job).where(in_index(ENDED_ROWS), Job.owner_known.is_(False))
"""Dead and discarded jobs whose owner is not known yet, found in ix_jobs_ended_finished."""


async def settle_owners(db: Database, registry: JobRegistry) -> int:
    """Store the owner of every dead or discarded job whose owner is not known yet; returns how
    many were settled. Writes only when there are such jobs."""
    settled = 0
    while True:
        async with db.read() as session:
            jobs = list(await session.scalars(UNSETTLED.limit(SETTLE_BATCH)))
            owners = [(job.id, await owner_of(session, registry, job)) for job in jobs]
        if not owners:
            return settled
        async with db.write() as uow:
            for job_id, workspace_id in owners:
                await uow.session.execute(
                    update(Job)
                    .where(Job.id == job_id)
                    .values(workspace_id=workspace_id, owner_known=True)
                )
        settled += len(owners)
        if len(owners) < SETTLE_BATCH:
            return settled
