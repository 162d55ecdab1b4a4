"""Schedules: creation with its first baseline, edits, the direct-selection editor, pause, resume,
end, "duplicate for mobile", manual requests and estimates (RT-1 to RT-29). What a person reads
about a schedule is shaped in :mod:`app.engines.ranktracking.records.schedules`.

Services never commit; the caller's unit of work does. Every lookup is scoped by workspace, so another
workspace's id answers "not found".
"""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from sqlalchemy import exists, func, select
from sqlalchemy.exc import IntegrityError

from app.db.session import ReadSession, UnitOfWork, WriteSession
from app.engines.ranktracking import ledger
from app.engines.ranktracking.amounts import MICROS_PER_EUR, eur_down, eur_up
from app.engines.ranktracking.claim.admission import BASELINE, MANUAL, Launch
from app.engines.ranktracking.claim.handoff import PendingLaunch, admit_and_send, admit_within
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.due import RUNS_PER_MONTH, first_due
from app.engines.ranktracking.errors import (
    DuplicateSchedule,
    ScheduleLimitReached,
    ScheduleNotFound,
    ScheduleStateConflict,
)
from app.engines.ranktracking.keywords import normalise_all
from app.engines.ranktracking.lists import get_list
from app.engines.ranktracking.members import list_size, resolve
from app.engines.ranktracking.models import (
    ACTIVE,
    ACTIVE_RUN_STATUSES,
    ARCHIVED,
    CANCELLED,
    FAILED,
    PAUSED_BALANCE,
    PAUSED_USER,
    Run,
    Schedule,
)
from app.engines.ranktracking.money import eur
from app.engines.ranktracking.pricing import PRIORITY, STANDARD, PriceList, quote
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.schedule_rules import (
    DEPTH_NAMES,
    Config,
    _Errors,
    cap_cents,
    dedup_key,
    validated,
)
from app.engines.ranktracking.schemas import (
    EstimateOut,
    EstimatePart,
    ScheduleEdit,
    ScheduleIn,
)
from app.errors import ValidationFailed
from app.platform.models import Workspace
from app.platform.service import Principal
from app.settings import RankTrackingSettings

LIVE_STATUSES = (ACTIVE, PAUSED_USER, PAUSED_BALANCE)


# -- lookups -------------------------------------------------------------------------------------


async def get_schedule(session: ReadSession, workspace_id: int, schedule_id: int) -> Schedule:
    found = await session.scalar(
        select(Schedule).where(Schedule.id == schedule_id, Schedule.workspace_id == workspace_id)
    )
    if found is None:
        raise ScheduleNotFound("schedule not found")
    return found


async def lock_schedule(session: WriteSession, workspace_id: int, schedule_id: int) -> Schedule:
    found = (
        await session.execute(
            select(Schedule)
            .where(Schedule.id == schedule_id, Schedule.workspace_id == workspace_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if found is None:
        raise ScheduleNotFound("schedule not found")
    return found


async def list_schedules(
    session: ReadSession, workspace_id: int, *, include_archived: bool = False
) -> list[Schedule]:
    stmt = select(Schedule).where(Schedule.workspace_id == workspace_id)
    if not include_archived:
        stmt = stmt.where(Schedule.status != ARCHIVED)
    return list((await session.execute(stmt.order_by(Schedule.id))).scalars())


async def live_count(session: ReadSession, workspace_id: int) -> int:
    return int(
        await session.scalar(
            select(func.count())
            .select_from(Schedule)
            .where(Schedule.workspace_id == workspace_id, Schedule.status.in_(LIVE_STATUSES))
        )
        or 0
    )


# -- configuration ---------------------------------------------------------------------------------


def config_of(data: ScheduleIn, rt: RankTrackingSettings, *, require_name: bool = True) -> Config:
    return validated(
        name=data.name,
        data_type=data.data_type,
        frequency=data.frequency,
        list_id=data.list_id,
        keywords=data.keywords,
        depth=data.depth,
        location_code=data.location_code,
        language_code=data.language_code,
        domain=data.domain,
        devices=list(data.devices) if data.devices is not None else None,
        packages=list(data.packages) if data.packages is not None else None,
        monthly_cap_eur=data.monthly_cap_eur,
        max_selection=rt.max_selection_keywords,
        require_name=require_name,
    )


def config_from_schedule(schedule: Schedule) -> Config:
    return Config(
        name=schedule.name,
        data_type=schedule.data_type,
        frequency=schedule.frequency,
        list_id=schedule.list_id,
        keywords=list(schedule.keywords) if schedule.keywords is not None else None,
        depth=schedule.depth,
        location_code=schedule.location_code,
        language_code=schedule.language_code,
        domain=schedule.domain,
        devices=schedule.device_list,
        packages=list(schedule.packages or []),
        monthly_cap_cents=schedule.monthly_cap_cents,
    )


async def _keyword_count(
    session: ReadSession, workspace_id: int, config: Config, rt: RankTrackingSettings
) -> int:
    """Resolved members now; a list past the per-run limit is refused (RT-5)."""
    if config.list_id is None:
        return len(config.keywords or [])
    await get_list(session, workspace_id, config.list_id)
    size = await list_size(session, config.list_id)
    if size > rt.max_run_keywords:
        raise ValidationFailed.field(
            "list_id",
            f"the list has {size} keywords; a run may request at most {rt.max_run_keywords}",
            code="members_over_limit",
        )
    return size


async def _check_duplicate(
    session: ReadSession, workspace_id: int, key: str | None, but: int | None
) -> None:
    if key is None:
        return
    stmt = select(Schedule.id, Schedule.name).where(
        Schedule.workspace_id == workspace_id,
        Schedule.dedup_key == key,
        Schedule.status != ARCHIVED,
    )
    if but is not None:
        stmt = stmt.where(Schedule.id != but)
    row = (await session.execute(stmt)).first()
    if row is not None:
        raise DuplicateSchedule(
            f'schedule {row[0]} ("{row[1]}") already measures this list with the same data type, '
            "frequency, devices, location and language; edit it or end it first",
            details=[{"field": "list_id", "schedule_id": row[0], "code": "duplicate_schedule"}],
        )


# -- estimates -------------------------------------------------------------------------------------


def _display(value: Decimal, places: str) -> str:
    return str(value.quantize(Decimal(places), rounding=ROUND_HALF_UP))


async def estimate(
    session: ReadSession,
    rt: RankTrackingSettings,
    *,
    organisation_id: int,
    config: Config,
    keyword_count: int,
    queue: str = STANDARD,
) -> EstimateOut:
    """RT-18: the admission estimate; RT-19: the monthly figure is the standard quote times the
    average frequency, rounded up to the cent."""
    prices = PriceList.from_settings(rt)
    args = {
        "data_type": config.data_type,
        "count": keyword_count,
        "depth": config.depth,
        "devices": config.devices,
        "packages": config.packages,
    }
    run_quote = quote(prices, queue=queue, **args)  # type: ignore[arg-type]
    standard = quote(prices, queue=STANDARD, **args)  # type: ignore[arg-type]
    per_month = RUNS_PER_MONTH[config.frequency]
    from app.engines.ranktracking.pricing import fraction_cents_up

    monthly = fraction_cents_up(standard.total_micros, per_month)
    available = (await ledger.balance_of(session, organisation_id)).available_micros
    per_keyword = (
        Decimal(run_quote.total_micros) / MICROS_PER_EUR / keyword_count
        if keyword_count
        else Decimal(0)
    )
    return EstimateOut(
        keyword_count=keyword_count,
        queue=queue,  # type: ignore[arg-type]
        cost_per_run_micros=run_quote.total_micros,
        cost_per_run_eur=eur_up(run_quote.total_micros),
        parts=[EstimatePart(device=d, micros=c) for d, c in run_quote.parts],
        runs_per_month=_display(Decimal(per_month.numerator) / per_month.denominator, "0.01"),
        average_per_keyword_eur=_display(per_keyword, "0.000001"),
        monthly_cents=monthly,
        monthly_eur=eur(monthly),
        available_micros=available,
        available_eur=eur_down(available),
        balance_after_run_micros=available - run_quote.total_micros,
        balance_after_run_eur=eur_down(available - run_quote.total_micros),
    )


async def estimate_new(
    session: ReadSession, rt: RankTrackingSettings, principal: Principal, data: ScheduleIn
) -> EstimateOut:
    config = config_of(data, rt, require_name=False)
    count = await _keyword_count(session, principal.workspace_id, config, rt)
    return await estimate(
        session, rt, organisation_id=principal.organisation_id, config=config, keyword_count=count
    )


async def estimate_existing(
    session: ReadSession, rt: RankTrackingSettings, schedule: Schedule, queue: str = STANDARD
) -> EstimateOut:
    config = config_from_schedule(schedule)
    members = await resolve(session, schedule, rt.max_run_keywords)
    if members.over:
        raise ValidationFailed.field(
            "list_id",
            f"the list has {members.total} keywords; a run may request at most {rt.max_run_keywords}",
            code="members_over_limit",
        )
    if queue == PRIORITY and schedule.data_type != "serp":
        raise ValidationFailed.field("queue", "keyword data has no priority queue")
    return await estimate(
        session,
        rt,
        organisation_id=schedule.organisation_id,
        config=config,
        keyword_count=len(members.keywords),
        queue=queue,
    )


# -- creation, edits --------------------------------------------------------------------------------


async def create(
    session: WriteSession,
    rt: RankTrackingSettings,
    principal: Principal,
    data: ScheduleIn,
    now: datetime,
) -> Schedule:
    """Save a schedule (RT-1 to RT-17 rules). The caller then requests the baseline."""
    config = config_of(data, rt)
    # Serialise creations per workspace so two at once cannot both pass the limit.
    await session.execute(
        select(Workspace.id).where(Workspace.id == principal.workspace_id).with_for_update()
    )
    await _keyword_count(session, principal.workspace_id, config, rt)
    if await live_count(session, principal.workspace_id) >= rt.max_active_schedules:
        raise ScheduleLimitReached(
            f"this workspace already has {rt.max_active_schedules} active or paused schedules; "
            "end one first"
        )
    key = dedup_key(config)
    await _check_duplicate(session, principal.workspace_id, key, None)
    schedule = Schedule(
        workspace_id=principal.workspace_id,
        organisation_id=principal.organisation_id,
        owner_user_id=principal.user_id,
        name=config.name,
        list_id=config.list_id,
        keywords=config.keywords,
        data_type=config.data_type,
        frequency=config.frequency,
        depth=config.depth,
        location_code=config.location_code,
        language_code=config.language_code,
        domain=config.domain,
        devices=config.devices_text,
        packages=config.packages or None,
        monthly_cap_cents=config.monthly_cap_cents,
        status=ACTIVE,
        dedup_key=key,
        anchor_at=now,
        next_due_at=first_due(now, config.frequency),
        retrying=False,
        consecutive_blocks=0,
        consecutive_failures=0,
        created_at=now,
        updated_at=now,
    )
    session.add(schedule)
    await _flush_checking_duplicates(session)
    activity.record(
        session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=activity.SCHEDULE_CREATED,
        message=f'"{schedule.name}" created ({schedule.data_type}, {schedule.frequency})',
        now=now,
    )
    return schedule


async def create_and_baseline(
    deps: RankTrackingDeps, principal: Principal, data: ScheduleIn
) -> tuple[Schedule, Launch]:
    """RT-27: save the schedule, then request its first baseline through admission. Creation
    stands even when the baseline is skipped or fails; the outcome is returned explicitly."""
    now = deps.clock.now()
    async with deps.db.write() as uow:
        schedule = await create(uow.session, deps.settings.ranktracking, principal, data, now)
    launch = await admit_and_send(deps, schedule.id, trigger=BASELINE, queue=STANDARD, now=now)
    async with deps.db.read() as session:
        schedule = await get_schedule(session, principal.workspace_id, schedule.id)
    return schedule, launch


async def create_with_baseline_in(
    uow: UnitOfWork, deps: RankTrackingDeps, principal: Principal, data: ScheduleIn
) -> tuple[Schedule, PendingLaunch]:
    """RT-27 in one unit of work (the API's retryable creation): the schedule and its baseline
    request commit together, so a retry with the same ``Idempotency-Key`` finds both or neither.
    The caller hands the baseline off once that unit of work has committed
    (:meth:`PendingLaunch.hand_off`) and reports what that did."""
    now = deps.clock.now()
    schedule = await create(uow.session, deps.settings.ranktracking, principal, data, now)
    launch = await admit_within(uow, deps, schedule.id, trigger=BASELINE, queue=STANDARD, now=now)
    return schedule, launch


FIXED_MESSAGE = "is fixed after creation; create another schedule instead"


async def edit(
    session: WriteSession,
    rt: RankTrackingSettings,
    schedule: Schedule,
    data: ScheduleEdit,
    now: datetime,
) -> Schedule:
    """RT-16: edit the editable fields; the next requests use them, history is untouched."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be edited")
    if data.data_type is not None and data.data_type != schedule.data_type:
        raise ValidationFailed.field("data_type", FIXED_MESSAGE, code="fixed_field")
    if data.list_id is not None and data.list_id != schedule.list_id:
        raise ValidationFailed.field("list_id", FIXED_MESSAGE, code="fixed_field")
    current = config_from_schedule(schedule)
    errors = _Errors()
    cap = current.monthly_cap_cents
    if data.unlimited:
        cap = None
    elif data.monthly_cap_eur is not None:
        cap = cap_cents(data.monthly_cap_eur, errors)
    errors.raise_if_any()
    new = validated(
        name=data.name if data.name is not None else current.name,
        data_type=current.data_type,
        frequency=data.frequency or current.frequency,
        list_id=current.list_id,
        keywords=current.keywords,
        depth=data.depth or (DEPTH_NAMES.get(current.depth) if current.depth else None),
        location_code=data.location_code
        if data.location_code is not None
        else current.location_code,
        language_code=data.language_code or current.language_code,
        domain=data.domain or current.domain,
        devices=list(data.devices) if data.devices is not None else (current.devices or None),
        packages=list(data.packages) if data.packages is not None else (current.packages or None),
        monthly_cap_eur=None,
        max_selection=rt.max_selection_keywords,
    )
    key = dedup_key(new)
    if key != schedule.dedup_key:
        await _check_duplicate(session, schedule.workspace_id, key, schedule.id)
    changed: list[str] = []
    for attr, value in (
        ("name", new.name),
        ("depth", new.depth),
        ("location_code", new.location_code),
        ("language_code", new.language_code),
        ("domain", new.domain),
        ("devices", new.devices_text),
        ("packages", new.packages or None),
        ("monthly_cap_cents", cap),
        ("dedup_key", key),
    ):
        if getattr(schedule, attr) != value:
            setattr(schedule, attr, value)
            if attr != "dedup_key":
                changed.append(attr)
    if new.frequency != schedule.frequency:
        # RT-11: the next due time is recomputed from the moment of the change.
        schedule.frequency = new.frequency
        schedule.anchor_at = now
        schedule.next_due_at = first_due(now, new.frequency)
        schedule.retrying = False
        changed.append("frequency")
    if changed:
        schedule.updated_at = now
        await _flush_checking_duplicates(session)
        activity.record(
            session,
            workspace_id=schedule.workspace_id,
            schedule_id=schedule.id,
            kind=activity.SCHEDULE_EDITED,
            message=f'"{schedule.name}" edited: {", ".join(changed)}',
            now=now,
        )
    return schedule


async def set_selection(
    session: WriteSession,
    rt: RankTrackingSettings,
    schedule: Schedule,
    keywords: list[str],
    now: datetime,
) -> Schedule:
    """The direct selection's own editor (RT-3)."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be edited")
    if schedule.list_id is not None:
        raise ValidationFailed.field(
            "keywords", "this schedule follows a keyword list; edit the list instead"
        )
    selection = normalise_all(keywords).keywords
    if not selection:
        raise ValidationFailed.field(
            "keywords", "a direct selection needs at least one keyword", code="selection_empty"
        )
    if len(selection) > rt.max_selection_keywords:
        raise ValidationFailed.field(
            "keywords",
            f"a direct selection holds at most {rt.max_selection_keywords} keywords ({len(selection)} given)",
            code="selection_too_large",
        )
    schedule.keywords = selection
    schedule.updated_at = now
    activity.record(
        session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=activity.SCHEDULE_EDITED,
        message=f'"{schedule.name}" selection set to {len(selection)} keywords',
        now=now,
    )
    return schedule


def mobile_draft(schedule: Schedule) -> ScheduleIn:
    """RT-17: a new mobile SERP schedule pre-filled from ``schedule`` (the source is untouched)."""
    if schedule.data_type != "serp":
        raise ValidationFailed.field("data_type", "only SERP schedules have devices")
    return ScheduleIn(
        name=f"{schedule.name} (mobile)",
        data_type="serp",
        frequency=schedule.frequency,  # type: ignore[arg-type]
        list_id=schedule.list_id,
        keywords=list(schedule.keywords) if schedule.keywords is not None else None,
        depth=DEPTH_NAMES.get(schedule.depth or 10),  # type: ignore[arg-type]
        location_code=schedule.location_code,
        language_code=schedule.language_code,
        domain=schedule.domain,
        devices=["mobile"],
        monthly_cap_eur=(
            Decimal(schedule.monthly_cap_cents) / 100 if schedule.monthly_cap_cents else None
        ),
    )


# -- pause, resume, end ----------------------------------------------------------------------------


async def close_active_runs(
    session: WriteSession, schedule: Schedule, *, code: str, message: str, now: datetime
) -> int:
    """Close the schedule's active child runs as failed and release their reservations."""
    runs = list(
        (
            await session.execute(
                select(Run)
                .where(Run.schedule_id == schedule.id, Run.status.in_(ACTIVE_RUN_STATUSES))
                .with_for_update()
                .execution_options(populate_existing=True)
            )
        ).scalars()
    )
    for run in runs:
        run.status = FAILED
        run.error_code, run.error_message = code, message
        run.finished_at = run.updated_at = now
        await ledger.release(
            session,
            run,
            organisation_id=schedule.organisation_id,
            now=now,
            note=f"run {run.id} {code}",
        )
    return len(runs)


async def pause(session: WriteSession, schedule: Schedule, now: datetime) -> Schedule:
    """RT-28: ``paused_user``; active runs closed as cancelled, reservations released."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be paused")
    if schedule.status == PAUSED_USER:
        return schedule
    schedule.status = PAUSED_USER
    schedule.updated_at = now
    await _cancel_runs_and_record(session, schedule, "paused", activity.SCHEDULE_PAUSED, now)
    return schedule


async def _cancel_runs_and_record(
    session: WriteSession, schedule: Schedule, verb: str, kind: str, now: datetime
) -> None:
    """Close the schedule's active runs as cancelled (releasing their reservations) and leave
    the pause or end in the activity feed."""
    closed = await close_active_runs(
        session, schedule, code=CANCELLED, message=f"cancelled: the schedule was {verb}", now=now
    )
    activity.record(
        session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=kind,
        message=f'"{schedule.name}" {verb}'
        + (f"; {closed} active run(s) cancelled" if closed else ""),
        now=now,
    )


async def resume(session: WriteSession, schedule: Schedule, now: datetime) -> Schedule:
    """RT-28: active again, failures cleared, due immediately; the cancelled gap is not refilled."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be resumed")
    if schedule.status == ACTIVE:
        return schedule
    schedule.status = ACTIVE
    schedule.consecutive_failures = 0
    schedule.consecutive_blocks = 0
    schedule.anchor_at = now
    schedule.next_due_at = now
    schedule.retrying = False
    schedule.updated_at = now
    activity.record(
        session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=activity.SCHEDULE_RESUMED,
        message=f'"{schedule.name}" resumed; due at the next hourly sweep',
        now=now,
    )
    return schedule


async def end(session: WriteSession, schedule: Schedule, now: datetime) -> Schedule:
    """RT-29: archived for good; active runs closed, reservations released, history kept."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("the schedule has already ended")
    schedule.status = ARCHIVED
    schedule.archived_at = now
    schedule.updated_at = now
    await _cancel_runs_and_record(session, schedule, "ended", activity.SCHEDULE_ENDED, now)
    return schedule


async def run_now(
    deps: RankTrackingDeps, principal: Principal, schedule_id: int, queue: str
) -> Launch:
    """RT-25/26: a manual request on the standard queue, or "measure quickly" on the priority
    queue (SERP only)."""
    async with deps.db.read() as session:
        schedule = await get_schedule(session, principal.workspace_id, schedule_id)
    _check_queue(schedule, queue)
    return await admit_and_send(
        deps, schedule_id, trigger=MANUAL, queue=queue, now=deps.clock.now()
    )


async def run_now_in(
    uow: UnitOfWork, deps: RankTrackingDeps, principal: Principal, schedule_id: int, queue: str
) -> PendingLaunch:
    """:func:`run_now` inside the caller's unit of work (the API's retryable manual request); the
    caller hands it off after the commit (:meth:`PendingLaunch.hand_off`)."""
    schedule = await get_schedule(uow.session, principal.workspace_id, schedule_id)
    _check_queue(schedule, queue)
    return await admit_within(
        uow, deps, schedule_id, trigger=MANUAL, queue=queue, now=deps.clock.now()
    )


def _check_queue(schedule: Schedule, queue: str) -> None:
    if queue == PRIORITY and schedule.data_type != "serp":
        raise ValidationFailed.field(
            "queue", "keyword data has no priority queue", code="no_priority"
        )


async def _flush_checking_duplicates(session: WriteSession) -> None:
    """Write pending changes; the partial unique index on live schedules' duplicate key (RT-15)
    turns a clash into :class:`DuplicateSchedule`, leaving the transaction usable."""
    try:
        async with session.begin_nested():
            await session.flush()
    except IntegrityError as exc:
        raise DuplicateSchedule("a live schedule with the same duplicate key exists") from exc


async def has_schedule(session: ReadSession, workspace_id: int) -> bool:
    """Whether the workspace has created a schedule."""
    return bool(await session.scalar(select(exists().where(Schedule.workspace_id == workspace_id))))
