"""A job's history of attempts: the one module that writes ``job_attempts``.

Both queue backends call it where an attempt ends without success, inside the transaction that
records the outcome, so the history and the job's state never disagree:

- the database queue, for failed attempts (:func:`record_failures`, beside the statement that
  puts the job back or marks it dead: a stale worker's outcome is dropped for both alike) and for
  attempts whose worker stopped (:func:`record_lost`, beside the recovery of expired leases);
- the arq runner, for every failed attempt and a job's death (:func:`record_arq_attempt`).

A successful attempt is the job's own row (``done``, ``finished_at``, ``leased_by``), so the hot
path of a job that succeeds writes nothing more; a person's action on a dead job is one row too
(:func:`record_action`). :func:`purge_attempts` forgets the history of jobs that are gone.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, exists, insert, select, text

from app.db.chunked import CHUNK_ROWS, delete_in_chunks
from app.db.session import Database, ReadSession, WriteSession
from app.db.types import UTCDateTime
from app.scheduling.models import (
    ATTEMPT_DEAD,
    ATTEMPT_FAILED,
    ATTEMPT_LOST,
    JOB_DEAD,
    JOB_DONE,
    JOB_RUNNING,
    JOBS,
    RUNNING_ROWS,
    Job,
    JobAttempt,
    in_index,
)

MAX_ERROR_CHARS = 4000


def process_identity() -> str:
    """Where an attempt ran when no lease names it (arq): ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


# Conditional on the attempt still running, like the outcome written beside it: a worker whose
# lease expired (and whose job another worker took) records nothing.
_FAILED = text(
    f"""
    INSERT INTO job_attempts (job_id, name, attempt, worker, finished_at, outcome, error)
    SELECT id, name, attempts, leased_by, :now, :outcome, :error FROM jobs
    WHERE id = :jid AND attempts = :att AND {JOBS.where_keyed(JOB_RUNNING)}
    """  # noqa: S608
).bindparams(bindparam("now", type_=UTCDateTime()))


async def record_failures(
    session: WriteSession, now: datetime, failures: Iterable[tuple[str, int, str, bool]]
) -> None:
    """Record failed attempts ``(job id, attempt, error, dead)`` of the database queue; call it
    before the statement that ends them (it reads them still running)."""
    params = [
        {
            "now": now,
            "jid": jid,
            "att": att,
            "outcome": ATTEMPT_DEAD if dead else ATTEMPT_FAILED,
            "error": error[:MAX_ERROR_CHARS],
        }
        for jid, att, error, dead in failures
    ]
    if params:
        await session.execute(_FAILED, params)


async def expired_holders(session: ReadSession, now: datetime) -> dict[tuple[str, int], str | None]:
    """Who holds each running job whose lease expired by ``now`` (read before the recovery
    clears it)."""
    rows = await session.execute(expired_leases(now))
    return {(str(jid), int(att)): worker for jid, att, worker in rows.all()}


def expired_leases(now: datetime) -> Select[str, int, str | None]:
    """Running jobs whose lease expired by ``now``, found in ix_jobs_running_lease."""
    return select(Job.id, Job.attempts, Job.leased_by).where(
        in_index(RUNNING_ROWS), Job.lease_expires_at < now
    )


async def record_lost(
    session: WriteSession,
    now: datetime,
    recovered: Sequence[Any],
    holders: Mapping[tuple[str, int], str | None],
    error: str,
) -> None:
    """Record the attempts a recovery took back: ``recovered`` rows are ``(id, name, attempts,
    status)`` as the recovery left them (``dead`` when out of tries)."""
    rows = [
        {
            "job_id": jid,
            "name": name,
            "attempt": att,
            "worker": holders.get((str(jid), int(att))),
            "finished_at": now,
            "outcome": ATTEMPT_DEAD if status == JOB_DEAD else ATTEMPT_LOST,
            "error": error,
        }
        for jid, name, att, status in recovered
    ]
    if rows:
        await session.execute(insert(JobAttempt), rows)


async def record_arq_attempt(
    session: WriteSession,
    now: datetime,
    *,
    job_id: str,
    name: str,
    attempt: int,
    error: str,
    dead: bool,
) -> None:
    """Record a failed attempt of a job run by arq, in this process."""
    session.add(
        JobAttempt(
            job_id=job_id,
            name=name,
            attempt=attempt,
            worker=process_identity(),
            finished_at=now,
            outcome=ATTEMPT_DEAD if dead else ATTEMPT_FAILED,
            error=error[:MAX_ERROR_CHARS],
        )
    )


def record_action(
    session: WriteSession, now: datetime, job: Job, *, action: str, actor: str, note: str | None
) -> None:
    """Record a person's action on a job (retried, requeued, discarded) and who took it."""
    session.add(
        JobAttempt(
            job_id=job.id,
            name=job.name,
            attempt=0,
            worker=actor[:100],
            finished_at=now,
            outcome=action,
            error=note,
        )
    )


async def attempts_of(session: ReadSession, job_id: str) -> list[JobAttempt]:
    """The job's recorded entries, oldest first."""
    rows = await session.scalars(
        select(JobAttempt).where(JobAttempt.job_id == job_id).order_by(JobAttempt.id)
    )
    return list(rows)


async def purge_attempts(db: Database, before: datetime, *, chunk_rows: int = CHUNK_ROWS) -> int:
    """Forget entries older than ``before`` of jobs that are gone or done (a dead or discarded
    job keeps its history as long as it is kept), a chunk per transaction."""
    kept = exists().where(and_(Job.id == JobAttempt.job_id, Job.status != JOB_DONE))
    return await delete_in_chunks(
        db,
        JobAttempt.__table__,  # type: ignore[arg-type]
        and_(JobAttempt.finished_at < before, ~kept),
        key=[JobAttempt.id],
        chunk_rows=chunk_rows,
    )
