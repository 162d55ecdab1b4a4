"""Admission: the one path every request takes — recurring, manual ("run now", "measure quickly")
and the creation baseline (RT-21 to RT-27, RT-30 to RT-32).

In order: lock the schedule, check its status and that no run is active, resolve the current members
and check the per-run limit, check the monthly cap, then reserve each device's full estimate against
the locked organisation balance inside a savepoint — all devices or none — and write the child runs
in ``dispatching``. Anything that stops a request leaves a visible, coded row (a request with its
skipped or failed child rows), except the manual refusals that the caller's response carries.

Sending the admitted runs to the worker happens after the commit (:mod:`.handoff`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from app.db.session import UnitOfWork, WriteSession
from app.engines.ranktracking import ledger
from app.engines.ranktracking.amounts import cents_to_micros, exact_eur
from app.engines.ranktracking.claim.child_rows import new_run, trace
from app.engines.ranktracking.claim.due_times import advance, schedule_retry
from app.engines.ranktracking.claim.schedule_locks import (
    claim_due_schedules,
    lock_schedules,
    read_schedules,
    with_active_runs,
)
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.members import Members, over_run_limit_reason, resolve_many
from app.engines.ranktracking.models import (
    ACTIVE,
    ARCHIVED,
    DISPATCHING,
    FAILED,
    PAUSED_BALANCE,
    PAUSED_USER,
    SKIPPED_BALANCE,
    SKIPPED_DISPATCH,
    Balance,
    Request,
    Run,
    Schedule,
)
from app.engines.ranktracking.pricing import STANDARD, PriceList, quote
from app.engines.ranktracking.schedules.states import SCHEDULES
from app.engines.ranktracking.wording import counted
from app.engines.ranktracking.work.notices import queue_pause_notice

RECURRING = "recurring"
MANUAL = "manual"
BASELINE = "baseline"

BLOCKS_BEFORE_PAUSE = 2
"""RT-23: consecutive balance blocks that pause a schedule."""


@dataclass(slots=True)
class Launch:
    """The outcome of one request: the child runs launched, or why none were."""

    schedule_id: int
    queue: str
    request_id: int | None = None
    run_ids: list[int] = field(default_factory=list)
    """The child runs launched: admitted and handed to the work queue."""
    skipped_run_ids: list[int] = field(default_factory=list)
    """Child runs admitted whose hand-off to the queue failed (now ``skipped_dispatch``)."""
    reason: str | None = None
    """``paused``, ``archived``, ``active_run``, ``members``, ``cap``, ``balance``, ``dispatch``,
    ``not_due``; None when runs were launched."""
    code: str | None = None
    message: str = ""

    @property
    def launched(self) -> int:
        return len(self.run_ids)


async def _block(
    uow: UnitOfWork,
    deps: RankTrackingDeps,
    schedule: Schedule,
    request: Request,
    *,
    code: str,
    message: str,
    now: datetime,
) -> None:
    """RT-23: a cap or balance block; the second in a row pauses the schedule."""
    trace(
        uow.session, schedule, request, status=SKIPPED_BALANCE, code=code, message=message, now=now
    )
    schedule.consecutive_blocks += 1
    if schedule.consecutive_blocks >= BLOCKS_BEFORE_PAUSE and schedule.status == ACTIVE:
        SCHEDULES.move(schedule, PAUSED_BALANCE)
        schedule.updated_at = now
        await queue_pause_notice(uow, deps.queue, schedule, now)


async def admit(
    uow: UnitOfWork,
    deps: RankTrackingDeps,
    schedule_id: int,
    *,
    trigger: str,
    queue: str = STANDARD,
    now: datetime,
    tick: datetime | None = None,
) -> Launch:
    """Run one request of ``schedule_id`` through admission inside ``uow``."""
    (launch,) = await admit_many(
        uow, deps, [schedule_id], trigger=trigger, queue=queue, now=now, tick=tick
    )
    return launch


async def admit_many(
    uow: UnitOfWork,
    deps: RankTrackingDeps,
    schedule_ids: list[int],
    *,
    trigger: str,
    queue: str = STANDARD,
    now: datetime,
    tick: datetime | None = None,
) -> list[Launch]:
    """Run one request of each schedule through admission inside ``uow``; one launch per id, in
    order.

    ``tick`` is the nominal time of the sweep that asked (None for a person's request): due times
    are compared with it and a retry counts its hour from it (RT-30, RT-31).

    The state every decision needs is read for the whole batch at once (schedules claimed, for a
    sweep, or locked, for a person's request; balances locked; active runs, members, month spend), each schedule is decided in memory in order —
    its devices reserved all together or not at all against the balance left by the schedules
    before it — and the rows are written with one multi-row statement per table.
    """
    launches = [Launch(schedule_id=i, queue=queue) for i in schedule_ids]
    open_ = await _open_schedules(uow.session, launches, trigger=trigger, now=now, tick=tick)
    if not open_:
        return launches
    active = await with_active_runs(uow.session, [s.id for _, s in open_])
    requests = await _write_requests(uow.session, open_, active, trigger, queue, now)
    batch = await _read_batch(uow.session, deps, [s for _, s in open_ if s.id not in active], now)
    admitted: list[_Admitted] = []
    for launch, schedule in open_:
        request = requests.get(schedule.id)
        if schedule.id in active:
            if request is not None:
                _skip_active(uow.session, schedule, request, launch, now=now, tick=tick)
            continue
        assert request is not None
        decided = await _decide(uow, deps, batch, launch, schedule, request, trigger, queue, now)
        if decided is not None:
            admitted.append(decided)
    await _reserve(uow.session, batch, admitted, now)
    return launches


@dataclass(slots=True)
class _Batch:
    """What admission reads once for the whole batch of schedules it decides."""

    members: dict[int, Members]
    spent: dict[int, int]
    balances: dict[int, Balance]
    available: dict[int, int]
    prices: PriceList


@dataclass(slots=True)
class _Admitted:
    launch: Launch
    schedule: Schedule
    runs: list[Run]
    amounts: list[int]


async def _open_schedules(
    session: WriteSession,
    launches: list[Launch],
    *,
    trigger: str,
    now: datetime,
    tick: datetime | None,
) -> list[tuple[Launch, Schedule]]:
    """Claim (a sweep) or lock (a person's request) the schedules; those refused before any row is
    written have their launch's reason set and are left out."""
    schedule_ids = [launch.schedule_id for launch in launches]
    unclaimed: dict[int, Schedule] = {}
    if trigger == RECURRING:
        locked = await claim_due_schedules(session, schedule_ids, due_by=tick or now, now=now)
        unclaimed = await read_schedules(session, [i for i in schedule_ids if i not in locked])
    else:
        locked = await lock_schedules(session, schedule_ids)
    open_: list[tuple[Launch, Schedule]] = []
    for launch in launches:
        schedule = locked.get(launch.schedule_id)
        if schedule is None and trigger == RECURRING:
            # Not claimed: say why, from the row as it reads now (it is not locked).
            if not _refused(launch, unclaimed.get(launch.schedule_id), trigger, tick or now):
                launch.reason, launch.code = "not_due", "admission_in_progress"
                launch.message = "another admission holds this schedule; it moves the due time"
            continue
        if _refused(launch, schedule, trigger, tick or now):
            continue
        assert schedule is not None
        open_.append((launch, schedule))
    return open_


async def _write_requests(
    session: WriteSession,
    open_: list[tuple[Launch, Schedule]],
    active: set[int],
    trigger: str,
    queue: str,
    now: datetime,
) -> dict[int, Request]:
    """The request row of each open schedule (a manual request refused for an active run gets
    none: the caller's response carries the refusal), written in one statement."""
    requests: dict[int, Request] = {}
    for launch, schedule in open_:
        if schedule.id in active:
            launch.reason, launch.code = "active_run", "run_active"
            launch.message = "a run of this schedule is still active"
            if trigger != RECURRING:
                continue
        requests[schedule.id] = _new_request(schedule, trigger, queue, now)
    session.add_all(requests.values())
    await session.flush()
    for launch, _ in open_:
        request = requests.get(launch.schedule_id)
        launch.request_id = request.id if request is not None else None
    return requests


async def _read_batch(
    session: WriteSession, deps: RankTrackingDeps, ready: list[Schedule], now: datetime
) -> _Batch:
    """Members, month spend and the locked balances of the schedules that may run."""
    rt = deps.settings.ranktracking
    members = await resolve_many(session, ready, rt.max_run_keywords)
    capped = [s.id for s in ready if s.monthly_cap_cents is not None]
    spent = await ledger.month_spend_of(session, capped, now)
    balances = await ledger.lock_balances(session, [s.organisation_id for s in ready], now)
    return _Batch(
        members=members,
        spent=spent,
        balances=balances,
        available={org: b.available_micros for org, b in balances.items()},
        prices=PriceList.from_settings(rt),
    )


def _skip_active(
    session: WriteSession,
    schedule: Schedule,
    request: Request,
    launch: Launch,
    *,
    now: datetime,
    tick: datetime | None,
) -> None:
    """A due time that cannot run still leaves its row, and is retried in an hour."""
    trace(
        session,
        schedule,
        request,
        status=SKIPPED_DISPATCH,
        code="run_active",
        message=launch.message,
        now=now,
    )
    schedule_retry(schedule, now, tick=tick)


async def _decide(
    uow: UnitOfWork,
    deps: RankTrackingDeps,
    batch: _Batch,
    launch: Launch,
    schedule: Schedule,
    request: Request,
    trigger: str,
    queue: str,
    now: datetime,
) -> _Admitted | None:
    """One schedule's request: refused for its members, its cap or the balance left by the
    schedules before it (a coded row), or admitted with its child runs added to the session."""
    found = batch.members[schedule.id]
    if not found.keywords or found.over:
        _refuse_members(uow.session, deps, launch, schedule, request, found, now=now)
        advance(schedule, recurring=trigger == RECURRING, admitted=False, now=now)
        return None
    group = quote(
        batch.prices,
        data_type=schedule.data_type,
        count=len(found.keywords),
        queue=queue,
        depth=schedule.depth,
        devices=schedule.device_list,
        packages=list(schedule.packages or []),
    )
    _check_money(batch, launch, schedule, group.total_micros)
    if launch.reason is not None:
        await _block(
            uow, deps, schedule, request, code=launch.code or "", message=launch.message, now=now
        )
        advance(schedule, recurring=trigger == RECURRING, admitted=False, now=now)
        return None
    batch.available[schedule.organisation_id] -= group.total_micros
    runs = [
        new_run(
            schedule,
            request,
            device=device,
            status=DISPATCHING,
            now=now,
            keywords=found.keywords,
            reserved_micros=micros,
        )
        for device, micros in group.parts
    ]
    uow.session.add_all(runs)
    advance(schedule, recurring=trigger == RECURRING, admitted=True, now=now)
    return _Admitted(launch, schedule, runs, [micros for _, micros in group.parts])


def _refuse_members(
    session: WriteSession,
    deps: RankTrackingDeps,
    launch: Launch,
    schedule: Schedule,
    request: Request,
    found: Members,
    *,
    now: datetime,
) -> None:
    """No keyword to request, or more than a run may: a failed row says which."""
    launch.reason = "members"
    if found.over:
        launch.code = "members_over_limit"
        # Creation's and the estimates' refusal, in the same words, plus "nothing was sent":
        # this one is read after the request, on the failed run, in the activity feed and in
        # the launch answer, where a reader needs to know that no task reached the provider.
        reason = over_run_limit_reason(found.total, deps.settings.ranktracking.max_run_keywords)
        launch.message = f"{reason}; nothing was sent"
    else:
        launch.code = "members_empty"
        launch.message = "the schedule has no keywords to request"
    trace(
        session, schedule, request, status=FAILED, code=launch.code, message=launch.message, now=now
    )


def _check_money(batch: _Batch, launch: Launch, schedule: Schedule, needed: int) -> None:
    """Set the launch's reason when the monthly cap or the balance left does not cover
    ``needed`` micro-euros."""
    if schedule.monthly_cap_cents is not None and batch.spent[
        schedule.id
    ] + needed > cents_to_micros(schedule.monthly_cap_cents):
        launch.reason, launch.code = "cap", "cap_reached"
        launch.message = (
            f"the monthly cap of {schedule.monthly_cap_cents / 100:.2f} EUR would be passed "
            f"({exact_eur(batch.spent[schedule.id])} EUR used, "
            f"{exact_eur(needed)} EUR needed)"
        )
    elif batch.available[schedule.organisation_id] < needed:
        # RT-22: every device's reservation or none — nothing of this group is written.
        launch.reason, launch.code = "balance", "insufficient_balance"
        launch.message = (
            f"the organisation balance ({exact_eur(batch.available[schedule.organisation_id])} "
            f"EUR available) does not cover this request ({exact_eur(needed)} EUR)"
        )


async def _reserve(
    session: WriteSession, batch: _Batch, admitted: list[_Admitted], now: datetime
) -> None:
    """Write every admitted run (and trace row) in one INSERT, then hold each run's reservation
    against its organisation's locked balance."""
    await session.flush()
    holds: list[ledger.Hold] = []
    for entry in admitted:
        holds += [
            ledger.Hold(run=run, organisation_id=entry.schedule.organisation_id, amount_micros=m)
            for run, m in zip(entry.runs, entry.amounts, strict=True)
        ]
        entry.launch.run_ids = [r.id for r in entry.runs]
        entry.launch.message = f"{counted(len(entry.runs), 'child run')} sent"
    await ledger.reserve_many(session, batch.balances, holds, now)
    await session.flush()


def _refused(launch: Launch, schedule: Schedule | None, trigger: str, due_by: datetime) -> bool:
    """Refusals that leave no row: a missing, ended or paused schedule, or one not due by
    ``due_by`` (the sweep's nominal tick)."""
    if schedule is None:
        launch.reason, launch.code, launch.message = (
            "archived",
            "schedule_missing",
            "no such schedule",
        )
    elif schedule.status == ARCHIVED:
        launch.reason, launch.code = "archived", "schedule_archived"
        launch.message = "the schedule has ended"
    elif schedule.status in (PAUSED_USER, PAUSED_BALANCE):
        launch.reason = "paused"
        launch.code = (
            "schedule_paused" if schedule.status == PAUSED_USER else "schedule_paused_balance"
        )
        launch.message = (
            "the schedule is paused"
            if schedule.status == PAUSED_USER
            else "the schedule is paused after balance blocks; resume it first"
        )
    elif trigger == RECURRING and schedule.next_due_at > due_by:
        launch.reason, launch.code, launch.message = "not_due", "not_due", "not due yet"
    else:
        return False
    return True


def _new_request(schedule: Schedule, trigger: str, queue: str, now: datetime) -> Request:
    return Request(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        trigger=trigger,
        queue=queue,
        due_at=schedule.next_due_at if trigger == RECURRING else None,
        created_at=now,
    )
