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
from datetime import datetime, timedelta

from sqlalchemy import select

from app.db.session import UnitOfWork, WriteSession
from app.engines.ranktracking import activity, ledger
from app.engines.ranktracking.env import Env
from app.engines.ranktracking.members import resolve
from app.engines.ranktracking.models import (
    ACTIVE,
    ACTIVE_RUN_STATUSES,
    ARCHIVED,
    DISPATCHING,
    FAILED,
    PAUSED_BALANCE,
    PAUSED_USER,
    SKIPPED_BALANCE,
    SKIPPED_DISPATCH,
    Request,
    Run,
    Schedule,
)
from app.engines.ranktracking.notices import queue_pause_notice
from app.engines.ranktracking.pricing import STANDARD, PriceList, quote
from app.engines.ranktracking.recurrence import due_after_run, first_due

RECURRING = "recurring"
MANUAL = "manual"
BASELINE = "baseline"

RETRY_AFTER = timedelta(hours=1)
"""RT-31: the first retry after a dispatch that did not reach the worker waits one hour."""

BLOCKS_BEFORE_PAUSE = 2
"""RT-23: consecutive balance blocks that pause a schedule."""


@dataclass(slots=True)
class Launch:
    """The outcome of one request: the child runs launched, or why none were."""

    schedule_id: int
    queue: str
    request_id: int | None = None
    run_ids: list[int] = field(default_factory=list)
    reason: str | None = None
    """``paused``, ``archived``, ``active_run``, ``members``, ``cap``, ``balance``, ``dispatch``,
    ``not_due``; None when runs were launched."""
    code: str | None = None
    message: str = ""

    @property
    def launched(self) -> int:
        return len(self.run_ids)


class _Short(Exception):
    """A device's reservation did not fit in the balance: undo the whole group."""


async def lock_schedule(session: WriteSession, schedule_id: int) -> Schedule | None:
    """The schedule row, locked for the rest of the transaction (PostgreSQL; SQLite write
    transactions are serialised already)."""
    return (
        await session.execute(
            select(Schedule)
            .where(Schedule.id == schedule_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()


async def has_active_run(session: WriteSession, schedule_id: int) -> bool:
    found = await session.scalar(
        select(Run.id)
        .where(Run.schedule_id == schedule_id, Run.status.in_(ACTIVE_RUN_STATUSES))
        .limit(1)
    )
    return found is not None


def _devices(schedule: Schedule) -> list[str | None]:
    return list(schedule.device_list) if schedule.data_type == "serp" else [None]


def _new_run(
    schedule: Schedule,
    request: Request,
    *,
    device: str | None,
    status: str,
    now: datetime,
    keywords: list[str] | None = None,
    code: str | None = None,
    message: str | None = None,
) -> Run:
    terminal = status != DISPATCHING
    return Run(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        request_id=request.id,
        data_type=schedule.data_type,
        device=device,
        queue=request.queue,
        depth=schedule.depth,
        location_code=schedule.location_code,
        language_code=schedule.language_code,
        domain=schedule.domain,
        packages=list(schedule.packages or []) or None,
        keywords=keywords or [],
        status=status,
        error_code=code,
        error_message=message,
        requested=len(keywords or []),
        retrieved=0,
        no_data=0,
        reserved_cents=0,
        reservation_state="none",
        polls=0,
        created_at=now,
        finished_at=now if terminal else None,
        updated_at=now,
    )


async def _trace(
    session: WriteSession,
    schedule: Schedule,
    request: Request,
    *,
    status: str,
    code: str,
    message: str,
    now: datetime,
) -> None:
    """Child rows for a request that never ran: one per device, so the log shows the group."""
    for device in _devices(schedule):
        session.add(
            _new_run(
                schedule, request, device=device, status=status, now=now, code=code, message=message
            )
        )
    activity.record(
        session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=activity.RUN_FAILED if status == FAILED else activity.RUN_SKIPPED,
        code=code,
        message=f'"{schedule.name}": {message}',
        now=now,
    )
    await session.flush()


def _advance(schedule: Schedule, trigger: str, *, admitted: bool, now: datetime) -> None:
    """Move the due time after a request (RT-10, RT-26)."""
    if trigger == RECURRING:
        schedule.next_due_at = due_after_run(
            schedule.anchor_at, schedule.frequency, schedule.next_due_at, now
        )
        schedule.retrying = False
    elif admitted:
        # An admitted manual request (or the baseline) deliberately re-anchors at its start.
        schedule.anchor_at = now
        schedule.next_due_at = first_due(now, schedule.frequency)
        schedule.retrying = False
    schedule.updated_at = now


def schedule_retry(schedule: Schedule, now: datetime) -> None:
    """RT-31: retry in one hour; the schedule shows "retrying" until a request goes out."""
    schedule.next_due_at = now + RETRY_AFTER
    schedule.retrying = True
    schedule.updated_at = now


async def _block(
    uow: UnitOfWork,
    env: Env,
    schedule: Schedule,
    request: Request,
    *,
    code: str,
    message: str,
    now: datetime,
) -> None:
    """RT-23: a cap or balance block; the second in a row pauses the schedule."""
    await _trace(
        uow.session, schedule, request, status=SKIPPED_BALANCE, code=code, message=message, now=now
    )
    schedule.consecutive_blocks += 1
    if schedule.consecutive_blocks >= BLOCKS_BEFORE_PAUSE and schedule.status == ACTIVE:
        schedule.status = PAUSED_BALANCE
        schedule.updated_at = now
        await queue_pause_notice(uow, env.queue, schedule, now)


async def admit(
    uow: UnitOfWork,
    env: Env,
    schedule_id: int,
    *,
    trigger: str,
    queue: str = STANDARD,
    now: datetime,
) -> Launch:
    """Run one request of ``schedule_id`` through admission inside ``uow``."""
    session = uow.session
    rt = env.settings.ranktracking
    launch = Launch(schedule_id=schedule_id, queue=queue)
    schedule = await lock_schedule(session, schedule_id)
    if schedule is None:
        launch.reason, launch.code, launch.message = (
            "archived",
            "schedule_missing",
            "no such schedule",
        )
        return launch
    if schedule.status == ARCHIVED:
        launch.reason, launch.code = "archived", "schedule_archived"
        launch.message = "the schedule has ended"
        return launch
    if schedule.status in (PAUSED_USER, PAUSED_BALANCE):
        launch.reason = "paused"
        launch.code = (
            "schedule_paused" if schedule.status == PAUSED_USER else "schedule_paused_balance"
        )
        launch.message = (
            "the schedule is paused"
            if schedule.status == PAUSED_USER
            else "the schedule is paused after balance blocks; resume it first"
        )
        return launch
    if trigger == RECURRING and schedule.next_due_at > now:
        launch.reason, launch.code, launch.message = "not_due", "not_due", "not due yet"
        return launch

    if await has_active_run(session, schedule.id):
        launch.reason, launch.code = "active_run", "run_active"
        launch.message = "a run of this schedule is still active"
        if trigger == RECURRING:
            # A due time that cannot run still leaves its row, and is retried in an hour.
            request = await _new_request(session, schedule, trigger, queue, now)
            launch.request_id = request.id
            await _trace(
                session,
                schedule,
                request,
                status=SKIPPED_DISPATCH,
                code="run_active",
                message=launch.message,
                now=now,
            )
            schedule_retry(schedule, now)
        return launch

    request = await _new_request(session, schedule, trigger, queue, now)
    launch.request_id = request.id

    members = await resolve(session, schedule, rt.max_run_keywords)
    if not members.keywords or members.over:
        launch.reason = "members"
        if members.over:
            launch.code = "members_over_limit"
            launch.message = (
                f"the list has {members.total} keywords, more than the {rt.max_run_keywords} "
                "a run may request; nothing was sent"
            )
        else:
            launch.code = "members_empty"
            launch.message = "the schedule has no keywords to request"
        await _trace(
            session,
            schedule,
            request,
            status=FAILED,
            code=launch.code,
            message=launch.message,
            now=now,
        )
        _advance(schedule, trigger, admitted=False, now=now)
        return launch

    prices = PriceList.from_settings(rt)
    group = quote(
        prices,
        data_type=schedule.data_type,
        count=len(members.keywords),
        queue=queue,
        depth=schedule.depth,
        devices=schedule.device_list,
        packages=list(schedule.packages or []),
    )

    if schedule.monthly_cap_cents is not None:
        spent = await ledger.schedule_month_spend(session, schedule.id, now)
        if spent + group.total_cents > schedule.monthly_cap_cents:
            launch.reason, launch.code = "cap", "cap_reached"
            launch.message = (
                f"the monthly cap of {schedule.monthly_cap_cents / 100:.2f} EUR would be passed "
                f"({spent / 100:.2f} EUR used, {group.total_cents / 100:.2f} EUR needed)"
            )
            await _block(
                uow, env, schedule, request, code=launch.code, message=launch.message, now=now
            )
            _advance(schedule, trigger, admitted=False, now=now)
            return launch

    balance = await ledger.lock_balance(session, schedule.organisation_id, now)
    runs: list[Run] = []
    try:
        async with session.begin_nested():
            for device, cents in group.parts:
                run = _new_run(
                    schedule,
                    request,
                    device=device,
                    status=DISPATCHING,
                    now=now,
                    keywords=members.keywords,
                )
                session.add(run)
                await session.flush()
                if not await ledger.reserve(
                    session,
                    balance,
                    run,
                    organisation_id=schedule.organisation_id,
                    amount_cents=cents,
                    now=now,
                ):
                    raise _Short
                runs.append(run)
    except _Short:
        # The savepoint rolled back every reservation and provisional row of this request.
        available = (await ledger.balance_of(session, schedule.organisation_id)).available_cents
        launch.reason, launch.code = "balance", "insufficient_balance"
        launch.message = (
            f"the organisation balance ({available / 100:.2f} EUR available) does not cover "
            f"this request ({group.total_cents / 100:.2f} EUR)"
        )
        await _block(uow, env, schedule, request, code=launch.code, message=launch.message, now=now)
        _advance(schedule, trigger, admitted=False, now=now)
        return launch

    launch.run_ids = [r.id for r in runs]
    launch.message = f"{len(runs)} child run(s) sent"
    _advance(schedule, trigger, admitted=True, now=now)
    return launch


async def _new_request(
    session: WriteSession, schedule: Schedule, trigger: str, queue: str, now: datetime
) -> Request:
    request = Request(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        trigger=trigger,
        queue=queue,
        due_at=schedule.next_due_at if trigger == RECURRING else None,
        created_at=now,
    )
    session.add(request)
    await session.flush()
    return request
