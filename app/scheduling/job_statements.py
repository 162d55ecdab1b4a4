"""The database queue's statements: the lease, the completions, the failed attempts, the release.

The lease is the shared claim primitive (:data:`JOB_CLAIM`, :mod:`app.scheduling.claim`); the
completions are plain SQL: they run once per batch on the hot path, and spelling out unnest and
the data-modifying CTE is clearer here than their ORM equivalents. Every state they write or test
comes from the jobs' machine (:data:`~app.scheduling.job_states.JOBS`), and every change of a
leased job is conditional on ``(id, attempts, running)``: a worker whose lease expired cannot
overwrite the newer attempt's outcome. Only constants are interpolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, text, update

from app.db.types import UTCDateTime
from app.scheduling.claim import Claim, claim_moves
from app.scheduling.jobs import PRIORITY_QUEUE
from app.scheduling.models import JOB_DEAD, JOB_DONE, JOB_QUEUED, JOB_RUNNING, JOBS, Job

Finished = tuple[str, int]
"""A job that ran to completion: ``(job id, attempt number)``."""


def lease_order(queues: Sequence[str]) -> list[str]:
    """The order queues are leased from: the priority queue first, then the others by name."""
    unique = sorted(set(queues))
    if PRIORITY_QUEUE in unique:
        unique.remove(PRIORITY_QUEUE)
        unique.insert(0, PRIORITY_QUEUE)
    return unique


def _sql(statement: str) -> Any:
    """A textual statement whose ``now``/``expires`` parameters are bound as UTC timestamps."""
    stmt = text(statement)
    times = [bindparam(k, type_=UTCDateTime()) for k in ("now", "expires") if f":{k}" in statement]
    return stmt.bindparams(*times)


# Due jobs of every queue a worker serves, in one statement: the queues in lease order (the priority
# queue first), within a queue lower priority values first, then the longest due. Each queue is its
# own scan of ix_jobs_leasable (queue, priority, run_at), read in order from its front however many
# jobs wait. Claiming a job counts the attempt; the attempt number is part of every later state
# change's condition.
JOB_CLAIM = Claim(
    table=Job.__table__,  # type: ignore[arg-type]
    due=f"{JOBS.where(JOB_QUEUED)} AND run_at <= :now",
    order_by="priority, run_at",
    returning=("id", "name", "payload", "attempts", "max_tries"),
    owner="leased_by",
    expires="lease_expires_at",
    sets={**claim_moves(JOBS, JOB_RUNNING), "attempts": "attempts + 1"},
    held=JOBS.where_keyed(JOB_RUNNING),
    partition="queue",
)


# Finished jobs: their ids (`id = ANY(…)`, found by primary key) and "id attempt" keys, matched
# with a hash of the array rather than a join against an unnested one (which compared every row
# with every key: 10,000 comparisons for a batch of 100). The status is tested by `where_keyed`
# so that the planner cannot use the partial index of running jobs instead: a bitmap scan of it
# reads every entry that finished jobs left in it since the last vacuum (bitmap scans never mark
# dead entries), a cost that grows with the jobs drained, where the primary key reads the 100.
_PG_FINISH = f"""
    UPDATE jobs SET {JOBS.set_sql(JOB_DONE)}, finished_at = :now, lease_expires_at = NULL
    WHERE jobs.id = ANY(CAST(:done_ids AS varchar[]))
      AND jobs.id || ' ' || jobs.attempts = ANY(CAST(:done_keys AS text[]))
      AND {JOBS.where_keyed(JOB_RUNNING, qualified=True)}
"""  # noqa: S608

# The previous batch's completions ride along with the next lease, written before the lease takes
# any row (see Claim.statement).
PG_COMPLETE_PRELUDE = f"WITH finished AS ({_PG_FINISH} RETURNING jobs.id)"

PG_COMPLETE = _sql(_PG_FINISH)

SQLITE_COMPLETE = _sql(
    f"""
    UPDATE jobs SET {JOBS.set_sql(JOB_DONE)}, finished_at = :now, lease_expires_at = NULL
    WHERE id = :done_id AND attempts = :done_attempt AND {JOBS.where_keyed(JOB_RUNNING)}
    """  # noqa: S608
)


def _attempt() -> Any:
    """An ``UPDATE`` of one leased attempt per parameter set (``jid``, ``att``)."""
    return update(Job.__table__).where(  # type: ignore[arg-type]
        Job.id == bindparam("jid"), Job.attempts == bindparam("att")
    )


_GIVEN_BACK = {"lease_expires_at": None, "leased_by": None}

# One failed attempt per parameter set: back to the queue at its retry time, or dead. Two
# statements, one per outcome, since a statement moves its rows to one state.
RETRY = JOBS.transition(_attempt(), JOB_QUEUED, from_=(JOB_RUNNING,)).values(
    run_at=bindparam("retry_at"), last_error=bindparam("error"), finished_at=None, **_GIVEN_BACK
)
BURY = JOBS.transition(_attempt(), JOB_DEAD, from_=(JOB_RUNNING,)).values(
    run_at=bindparam("retry_at"),
    last_error=bindparam("error"),
    finished_at=bindparam("dead_at"),
    **_GIVEN_BACK,
)

# A leased job given back without counting the attempt (graceful shutdown).
RELEASE = JOBS.transition(_attempt(), JOB_QUEUED, from_=(JOB_RUNNING,)).values(
    attempts=Job.attempts - 1, **_GIVEN_BACK
)


def done_params(now: datetime, finished: Sequence[Finished]) -> dict[str, Any]:
    """The PostgreSQL completion's parameters for ``finished``."""
    return {
        "now": now,
        "done_ids": [jid for jid, _ in finished],
        "done_keys": [f"{jid} {att}" for jid, att in finished],
    }


def sqlite_done_params(now: datetime, finished: Sequence[Finished]) -> list[dict[str, Any]]:
    """The SQLite completion's parameter sets for ``finished`` (one statement, many sets)."""
    return [{"now": now, "done_id": jid, "done_attempt": att} for jid, att in finished]
