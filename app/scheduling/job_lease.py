"""Whether a running database-queue job still holds its lease, asked before an outside call.

The worker's heartbeat renews the leases of the jobs it runs (``JOB_LEASE_SECONDS``, renewed every
third of it). When renewals stop reaching the database for longer than a lease — a lock episode, a
process frozen under load — the job's lease expires and another worker runs the job again. The
first run must then stop before its next outside call (a provider post, a Graph write) instead of
repeating what the new run does. A job is identified by its id and attempt: every lease of the job
increments ``attempts``, so a row still ``running`` with this attempt and an expiry in the future is
this run's.

The worker's heartbeat also stops such a job by itself (:mod:`app.scheduling.outside_calls`: its
call permit is revoked, its task cancelled); this check is for work that wants to know before a
step of its own. On arq (Redis) the lease is the job's in-progress key, renewed by the worker's
lease keeper (:mod:`app.scheduling.arq_lease`), which revokes the job's call permit when it is lost:
there the check is the permit's.
"""

from __future__ import annotations

from sqlalchemy import select

from app.scheduling.claim import LeaseLost
from app.scheduling.jobs import JobContext
from app.scheduling.models import JOB_RUNNING, JOBS, Job
from app.scheduling.outside_calls import current_permit


async def holds_lease(ctx: JobContext) -> bool:
    """True while the job running with ``ctx`` still holds its database-queue lease (always True
    outside a database-queue job, e.g. a direct call in a test; on arq, until the lease keeper
    revoked the job's call permit)."""
    permit = current_permit()
    if permit is not None and permit.revoked:
        return False  # the worker's heartbeat already found the lease lost
    if not ctx.job_id or getattr(ctx.queue, "backend", "") != "database":
        return True
    async with ctx.db.read() as session:
        found = await session.scalar(
            select(Job.id).where(
                Job.id == ctx.job_id,
                Job.attempts == ctx.attempt,
                JOBS.keyed(JOB_RUNNING),
                Job.lease_expires_at > ctx.clock.now(),
            )
        )
    return found is not None


async def check_lease(ctx: JobContext) -> None:
    """Raise :class:`~app.scheduling.claim.LeaseLost` unless the job still holds its lease."""
    if not await holds_lease(ctx):
        raise LeaseLost(f"job {ctx.job_id} (attempt {ctx.attempt}) no longer holds its lease")
