"""The shared poller: one collector of finished provider tasks for the whole provider account
(spec §12, RT-33, RT-34).

DataForSEO's ``tasks_ready`` lists each finished task **once** (at most 1,000 a call) and allows
about 20 calls a minute per account, so it cannot be read per run: a run that threw away the other
runs' entries lost them, and 30 runs polling every 30 s passed the limit. Instead a sweep every
10 seconds (one tick at a time across processes) does, per endpoint with work outstanding:

1. ``tasks_ready`` while the per-minute budget allows (``RT_TASKS_READY_PER_MINUTE``, counted in
   the database so that every process shares it, each call stamped when it was made) and the last
   page was full of tasks not marked before; every listed task is marked ``ready_at`` on its
   result rows at once, so a crash after the call loses nothing. The listed tasks are collected
   before the next listing: the provider's reference describes ``tasks_ready`` as the completed
   tasks "which haven't been collected yet", so asking again first could return the same page;
2. ``task_get`` once per marked task, routed to its child run by task id (the ``tag`` carries the
   run id too); an unreadable or failed answer is retried on the next tick — the call is free —
   and only after ``RT_FETCH_ATTEMPTS`` does the keyword count as failed;
3. a task the listing never showed (a listing lost with a crash) is fetched directly once its run
   has waited ``DIRECT_GET_AFTER``, a few per tick;
4. a run whose tasks were posted ``RT_STALE_AFTER_MINUTES`` ago is ended with what it has (wall time
   since posting, not a count of polls).

Postbacks (``RT_POSTBACKS``) stay the fast path; a task they delivered is no longer pending and is
simply not fetched.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import and_, select, update

from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import (
    PENDING,
    RUNNING,
    TASK_FAILED,
    PollerState,
    Result,
    Run,
)
from app.engines.ranktracking.run_states import RUNS
from app.engines.ranktracking.work.run_end import finalize
from app.engines.ranktracking.work.runs import Outcome, apply_outcomes, fetch_task
from app.integrations.serp import ProviderError, SerpClient
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep

log = logging.getLogger(__name__)

ENDPOINTS = {"serp": "serp", "keyword_data": "keywords"}
"""Run data type → the provider endpoint family its tasks are listed under."""
READY_PAGE = 1000
"""``tasks_ready`` returns at most this many tasks a call; a full page means more may wait."""
FETCHES_PER_TICK = 5000
FETCH_CONCURRENCY = 16
DIRECT_GET_AFTER = timedelta(minutes=15)
DIRECT_GETS_PER_TICK = 20
WINDOW = timedelta(minutes=1)


@dataclass(slots=True)
class PollReport:
    ready_calls: int = 0
    listed: int = 0
    fetched: int = 0
    failed_fetches: int = 0
    written: int = 0
    runs_closed: int = 0
    budget_exhausted: list[str] = field(default_factory=list)


async def _has_pending(deps: RankTrackingDeps, data_type: str) -> bool:
    async with deps.db.read() as session:
        found = await session.scalar(
            select(Result.id)
            .join(Run, Run.id == Result.run_id)
            .where(Run.status == RUNNING, Run.data_type == data_type, Result.state == PENDING)
            .limit(1)
        )
        return found is not None


async def _take_budget(deps: RankTrackingDeps, endpoint: str, now: datetime) -> str | None:
    """Reserve one ``tasks_ready`` call at ``now`` if the per-minute budget allows it; the stamp
    to move to the moment of the call (:func:`_stamp_at_call`), or None."""
    limit = max(1, deps.settings.ranktracking.tasks_ready_per_minute)
    async with deps.db.write() as uow:
        state = await uow.session.get(PollerState, endpoint, with_for_update=True)
        if state is None:
            state = PollerState(endpoint=endpoint, calls=[], updated_at=now)
            uow.session.add(state)
        recent = [c for c in state.calls if now - datetime.fromisoformat(c) < WINDOW]
        if len(recent) >= limit:
            return None
        stamp = now.isoformat()
        state.calls = [*recent, stamp]
        state.updated_at = now
        return stamp


async def _stamp_at_call(deps: RankTrackingDeps, endpoint: str, stamp: str, at: datetime) -> None:
    """Move a reserved stamp to when the call was answered (RT-50). The call may have waited for
    its pacing slot after the reservation; the provider counts it when it arrives, which is no
    later than its answer, so the window counted here never holds fewer calls than the
    provider's."""
    async with deps.db.write() as uow:
        state = await uow.session.get(PollerState, endpoint, with_for_update=True)
        if state is None:
            return
        calls = list(state.calls)
        moved = at.isoformat()
        if stamp in calls:
            calls[calls.index(stamp)] = moved
        else:
            calls.append(moved)
        state.calls = calls
        state.updated_at = at


@dataclass(frozen=True, slots=True)
class _Listing:
    listed: int
    new: int
    """Pending result rows this listing marked ready for the first time."""

    @property
    def worth_another(self) -> bool:
        """A full page with tasks not seen before: more may wait behind it. A page of tasks
        already marked (a provider that keeps listing tasks until they are collected, or lists
        them late) is not asked for again (RT-49)."""
        return self.listed >= READY_PAGE and self.new > 0


async def _list_ready(
    deps: RankTrackingDeps, client: SerpClient, data_type: str, report: PollReport
) -> _Listing | None:
    """One ``tasks_ready`` call within the budget, its tasks marked ready; None when the budget
    is spent or the call failed."""
    endpoint = ENDPOINTS[data_type]
    stamp = await _take_budget(deps, endpoint, deps.clock.now())
    if stamp is None:
        report.budget_exhausted.append(endpoint)
        return None
    try:
        listed = await (
            client.serp_tasks_ready() if data_type == "serp" else client.keyword_data_tasks_ready()
        )
    except ProviderError as exc:
        log.warning("tasks_ready (%s) failed: %s", endpoint, exc)
        await _stamp_at_call(deps, endpoint, stamp, deps.clock.now())
        return None
    now = deps.clock.now()
    await _stamp_at_call(deps, endpoint, stamp, now)
    report.ready_calls += 1
    report.listed += len(listed)
    ids = sorted({t.task_id for t in listed if t.task_id})
    new = 0
    async with deps.db.write() as uow:
        for start in range(0, len(ids), 500):
            marked = await uow.session.execute(
                update(Result)
                .where(
                    Result.task_id.in_(ids[start : start + 500]),
                    Result.state == PENDING,
                    Result.ready_at.is_(None),
                )
                .values(ready_at=now)
                .execution_options(synchronize_session=False)
            )
            new += int(getattr(marked, "rowcount", 0) or 0)
    return _Listing(listed=len(listed), new=new)


@dataclass(frozen=True, slots=True)
class _Task:
    run: Run
    task_id: str
    keywords: list[str]
    listed: bool


async def _due_fetches(deps: RankTrackingDeps, data_type: str, now: datetime) -> list[_Task]:
    """Tasks to fetch: every listed one still pending, then a few unlisted ones of runs that
    have waited long (a listing lost with a crash)."""
    async with deps.db.read() as session:
        pending = (
            select(Result.run_id, Result.task_id, Result.keyword)
            .join(Run, Run.id == Result.run_id)
            .where(Run.status == RUNNING, Run.data_type == data_type, Result.state == PENDING)
        )
        listed_rows = (
            await session.execute(
                pending.where(Result.ready_at.is_not(None))
                .order_by(Result.ready_at, Result.id)
                .limit(FETCHES_PER_TICK)
            )
        ).all()
        late_rows = (
            await session.execute(
                pending.where(Run.started_at <= now - DIRECT_GET_AFTER, Result.ready_at.is_(None))
                .order_by(Result.id)
                .limit(DIRECT_GETS_PER_TICK)
            )
        ).all()
        run_ids = {int(r[0]) for r in [*listed_rows, *late_rows]}
        runs = (
            {
                r.id: r
                for r in (await session.execute(select(Run).where(Run.id.in_(run_ids)))).scalars()
            }
            if run_ids
            else {}
        )
    grouped: dict[tuple[int, str], tuple[list[str], bool]] = {}
    for rows, listed in ((listed_rows, True), (late_rows, False)):
        for run_id, task_id, keyword in rows:
            key = (int(run_id), str(task_id or ""))
            if key not in grouped:
                grouped[key] = ([], listed)
            grouped[key][0].append(keyword)
    return [
        _Task(run=runs[run_id], task_id=task_id, keywords=keywords, listed=listed)
        for (run_id, task_id), (keywords, listed) in grouped.items()
        if task_id
    ]


async def _fetch_all(
    deps: RankTrackingDeps, client: SerpClient, tasks: list[_Task], report: PollReport
) -> None:
    gate = asyncio.Semaphore(FETCH_CONCURRENCY)

    async def one(task: _Task) -> tuple[_Task, Outcome | None]:
        async with gate:
            return task, await fetch_task(client, task.run, task.task_id, task.keywords)

    done = await asyncio.gather(*(one(t) for t in tasks))
    report.fetched += len(done)
    by_run: dict[int, list[Outcome]] = {}
    failed: list[_Task] = []
    for task, outcome in done:
        if outcome is None:
            if task.listed:
                failed.append(task)
            continue
        by_run.setdefault(task.run.id, []).append(outcome)
    report.failed_fetches += len(failed)
    now = deps.clock.now()
    attempts = deps.settings.ranktracking.fetch_attempts
    for task in failed:
        # Free to repeat: count the attempt; the last one gives the keyword up as failed.
        async with deps.db.write() as uow:
            await uow.session.execute(
                update(Result)
                .where(
                    Result.run_id == task.run.id,
                    Result.task_id == task.task_id,
                    Result.state == PENDING,
                )
                .values(fetch_attempts=Result.fetch_attempts + 1)
                .execution_options(synchronize_session=False)
            )
            given_up = await uow.session.execute(
                select(Result.keyword).where(
                    Result.run_id == task.run.id,
                    Result.task_id == task.task_id,
                    Result.state == PENDING,
                    Result.fetch_attempts >= attempts,
                )
            )
            keywords = list(given_up.scalars())
        if keywords:
            by_run.setdefault(task.run.id, []).append(
                Outcome({kw: (TASK_FAILED, {"error_code": "unreadable_answer"}) for kw in keywords})
            )
    for run_id, outcomes in by_run.items():
        async with deps.db.write() as uow:
            report.written += await apply_outcomes(uow, deps, run_id, outcomes, now)


async def _close_stuck(deps: RankTrackingDeps, now: datetime, report: PollReport) -> None:
    """End runs whose tasks were posted ``RT_STALE_AFTER_MINUTES`` ago with what they have."""
    limit = now - timedelta(minutes=deps.settings.ranktracking.stale_after_minutes)
    async with deps.db.read() as session:
        stuck = list(
            (
                await session.execute(
                    select(Run.id)
                    .where(and_(Run.status == RUNNING, Run.started_at <= limit))
                    .limit(200)
                )
            ).scalars()
        )
    for run_id in stuck:
        async with deps.db.write() as uow:
            run = (
                await uow.session.execute(
                    select(Run)
                    .where(Run.id == run_id, RUNS.keyed(RUNNING))
                    .with_for_update()
                    .execution_options(populate_existing=True)
                )
            ).scalar_one_or_none()
            if run is None:
                continue
            run.error_code = run.error_code or "tasks_timed_out"
            await finalize(uow, deps, run, now)
            report.runs_closed += 1


async def poll_ready(deps: RankTrackingDeps, client: SerpClient) -> PollReport:
    """One tick of the shared poller (see the module docstring)."""
    report = PollReport()
    for data_type in ENDPOINTS:
        if not await _has_pending(deps, data_type):
            continue
        # List, collect what was listed, list again only while the last page was full of tasks
        # not seen before: a provider that keeps listing uncollected tasks shows the same page
        # until they are collected, so asking again first would spend the budget on it.
        listing = await _list_ready(deps, client, data_type, report)
        while True:
            tasks = await _due_fetches(deps, data_type, deps.clock.now())
            if tasks:
                await _fetch_all(deps, client, tasks, report)
            if len(tasks) >= FETCHES_PER_TICK:
                continue
            if listing is None or not listing.worth_another:
                break
            listing = await _list_ready(deps, client, data_type, report)
    await _close_stuck(deps, deps.clock.now(), report)
    return report


async def poll_tick(ctx: JobContext, tick: datetime) -> None:
    deps = RankTrackingDeps.of(ctx)
    report = await poll_ready(deps, deps.serp)
    if report.ready_calls or report.fetched or report.runs_closed:
        log.info(
            "position tracking poll",
            extra={
                "ready_calls": report.ready_calls,
                "listed": report.listed,
                "fetched": report.fetched,
                "written": report.written,
                "closed": report.runs_closed,
            },
        )


POLL_SWEEP = Sweep("ranktracking.poll", EVERY_10_SECONDS, poll_tick)
