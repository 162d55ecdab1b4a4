"""Sending admitted child runs to the worker (RT-31).

With a transactional queue (the database queue) the job rows are written in the admission's own
transaction: they exist exactly when the runs do. With a separate broker (arq on Redis) the jobs are
published after the commit; when that fails the runs become ``skipped_dispatch``, their reservations are released and the
schedule retries in one hour, showing "retrying". A process that dies between the two steps leaves
``dispatching`` runs that reconciliation closes the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from app.db.session import UnitOfWork
from app.engines.ranktracking import ledger
from app.engines.ranktracking.claim.admission import Launch
from app.engines.ranktracking.claim.due_times import schedule_retry
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import ACTIVE, DISPATCHING, SKIPPED_DISPATCH, Run, Schedule
from app.engines.ranktracking.pricing import PRIORITY
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.run_states import RUNS
from app.engines.ranktracking.work.runs import POST_JOB, POST_PRIORITY_JOB, RunRef
from app.scheduling.jobs import JobSpec
from app.scheduling.queue import QueuedJob

log = logging.getLogger(__name__)


def _spec(launch: Launch) -> JobSpec[RunRef]:
    return POST_PRIORITY_JOB if launch.queue == PRIORITY else POST_JOB


async def stage(uow: UnitOfWork, deps: RankTrackingDeps, launch: Launch) -> bool:
    """Inside the admission's unit of work: queue the jobs there when the queue writes them in
    its transaction. Returns True when the jobs are staged (nothing is left for :func:`send`)."""
    return await stage_many(uow, deps, [launch])


async def stage_many(uow: UnitOfWork, deps: RankTrackingDeps, launches: list[Launch]) -> bool:
    """:func:`stage` for a batch of launches: every job in one statement."""
    if not deps.queue.transactional:
        return False
    jobs = _jobs(launches)
    if jobs:
        await deps.queue.enqueue_many(uow, jobs)
    return True


def _jobs(launches: list[Launch]) -> list[QueuedJob]:
    """One post job per admitted child run, its id naming the run (a repeat is dropped)."""
    return [
        (_spec(launch), RunRef(run_id=run_id), f"rt.post:{run_id}")
        for launch in launches
        for run_id in launch.run_ids
    ]


async def send(deps: RankTrackingDeps, launch: Launch, *, tick: datetime | None = None) -> Launch:
    """After the commit: publish the jobs; on failure record ``skipped_dispatch`` (RT-31).

    ``launch.run_ids`` keeps only the runs whose hand-off succeeded: when publishing fails the
    whole group moves to ``skipped_dispatch_ids`` (a two-device group never starts one device),
    so a response built from the launch counts only work that reached the queue (RT-26, RT-27).
    ``tick`` is the sweep's nominal time the retry hour counts from."""
    if not launch.run_ids:
        return launch
    try:
        await deps.queue.enqueue_many(None, _jobs([launch]))
    except Exception as exc:
        log.warning("child runs %s did not reach the worker: %s", launch.run_ids, exc)
        await not_dispatched(
            deps,
            launch.run_ids,
            code="dispatch_failed",
            message=f"the work queue could not be reached ({type(exc).__name__}); retrying in one hour",
            now=deps.clock.now(),
            tick=tick,
        )
        launch.skipped_run_ids = launch.run_ids
        launch.run_ids = []
        launch.reason, launch.code = "dispatch", "dispatch_failed"
        launch.message = "the request did not reach the worker; the schedule retries in one hour"
    return launch


async def not_dispatched(
    deps: RankTrackingDeps,
    run_ids: list[int],
    *,
    code: str,
    message: str,
    now: datetime,
    tick: datetime | None = None,
) -> int:
    """Close ``dispatching`` runs that never reached the worker and release their reservations."""
    closed = 0
    async with deps.db.write() as uow:
        runs = list(
            (
                await uow.session.execute(
                    select(Run)
                    .where(Run.id.in_(run_ids), RUNS.keyed(DISPATCHING))
                    .with_for_update()
                    .execution_options(populate_existing=True)
                )
            ).scalars()
        )
        for run in runs:
            schedule = await uow.session.get(Schedule, run.schedule_id)
            assert schedule is not None
            RUNS.move(run, SKIPPED_DISPATCH)
            run.error_code, run.error_message = code, message
            run.finished_at = run.updated_at = now
            await ledger.release(
                uow.session,
                run,
                organisation_id=schedule.organisation_id,
                now=now,
                note=f"run {run.id} not dispatched",
            )
            if schedule.status == ACTIVE:
                schedule_retry(schedule, now, tick=tick)
            activity.record(
                uow.session,
                workspace_id=run.workspace_id,
                schedule_id=run.schedule_id,
                run_id=run.id,
                kind=activity.RUN_SKIPPED,
                code=code,
                message=f'"{schedule.name}": run {run.id} {message}',
                now=now,
            )
            closed += 1
    return closed


async def admit_and_send(
    deps: RankTrackingDeps,
    schedule_id: int,
    *,
    trigger: str,
    queue: str,
    now: datetime,
    tick: datetime | None = None,
) -> Launch:
    """One request end to end: admission in its own unit of work, then the hand-off."""
    (launch,) = await admit_batch_and_send(
        deps, [schedule_id], trigger=trigger, queue=queue, now=now, tick=tick
    )
    return launch


async def admit_batch_and_send(
    deps: RankTrackingDeps,
    schedule_ids: list[int],
    *,
    trigger: str,
    queue: str,
    now: datetime,
    tick: datetime | None = None,
) -> list[Launch]:
    """A request of each schedule, admitted in one unit of work, then the hand-off."""
    from app.engines.ranktracking.claim.admission import admit_many

    async with deps.db.write() as uow:
        launches = await admit_many(
            uow, deps, schedule_ids, trigger=trigger, queue=queue, now=now, tick=tick
        )
        staged = await stage_many(uow, deps, launches)
    if staged:
        return launches
    return [await send(deps, launch, tick=tick) for launch in launches]


@dataclass(slots=True)
class PendingLaunch:
    """A launch admitted inside the caller's unit of work, with what is left to do once that
    unit of work has committed (:meth:`hand_off`)."""

    deps: RankTrackingDeps
    launch: Launch
    staged: bool
    """The jobs were written in the admission's transaction (database queue): nothing is left."""

    async def hand_off(self) -> Launch:
        """After the commit: publish to the broker; a failed publish turns the runs into
        ``skipped_dispatch`` and the launch says so. Call it before answering the person."""
        if self.staged:
            return self.launch
        return await send(self.deps, self.launch)


async def admit_within(
    uow: UnitOfWork,
    deps: RankTrackingDeps,
    schedule_id: int,
    *,
    trigger: str,
    queue: str,
    now: datetime,
) -> PendingLaunch:
    """One request inside the caller's unit of work (a request made with an ``Idempotency-Key``
    stores its answer in the same transaction). The jobs are staged in it with the database queue;
    with a broker the caller publishes them once it commits (:meth:`PendingLaunch.hand_off`) and
    only then composes its answer, so the answer never counts a run that did not reach the queue."""
    from app.engines.ranktracking.claim.admission import admit

    launch = await admit(uow, deps, schedule_id, trigger=trigger, queue=queue, now=now)
    staged = not launch.run_ids or await stage(uow, deps, launch)
    return PendingLaunch(deps=deps, launch=launch, staged=staged)
