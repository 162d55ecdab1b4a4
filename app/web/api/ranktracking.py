"""Position tracking JSON API under ``/api/v1/ranktracking``: schedules, locations, estimates,
manual runs, pause/resume/end, the log and results; and the one router every rank-tracking
handler is registered on (keyword lists in :mod:`.ranktracking_lists`, the balance, ledger and
activity feed in :mod:`.ranktracking_money`, reports and the rest in their own modules).

Handlers stay thin: a unit of work, a service call, a response shape. Every lookup is scoped by the
caller's workspace, so another workspace's id answers 404. The requests an outside system may retry
(create a list, add or import keywords, create a schedule, run now / measure quickly, top up) accept
an ``Idempotency-Key`` header: a retry with the same key and body gets the first answer back and
changes nothing; the same key with another body answers 409.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get, patch, post, put
from litestar.params import FromQuery, JSONBody, QueryParameter

from app.clock import Clock
from app.db.session import UnitOfWork
from app.engines.ranktracking import location_sync, locations
from app.engines.ranktracking.claim.handoff import PendingLaunch
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.errors import RunNotFound
from app.engines.ranktracking.models import Run
from app.engines.ranktracking.records.log import schedule_log
from app.engines.ranktracking.records.results import keyword_history, latest_results, run_results
from app.engines.ranktracking.records.schedules import launch_out, schedule_out
from app.engines.ranktracking.schedules import (
    creation,
    drafts,
    edits,
    estimates,
    lifecycle,
    lookup,
    manual_runs,
)
from app.engines.ranktracking.schemas import (
    CreatedOut,
    EstimateOut,
    KeywordHistoryOut,
    LaunchOut,
    LocationOut,
    LogOut,
    QueueName,
    RankScheduleIn,
    ResultOut,
    RunNowIn,
    ScheduleEdit,
    ScheduleOut,
    SelectionIn,
)
from app.pagination import checked_limit, cursor_number
from app.platform.service import Principal
from app.web.api import ranktracking_lists, ranktracking_money, ranktracking_reports
from app.web.api.common import RowId, api_router, idempotent
from app.web.auth import (
    CurrentPrincipal,
    CurrentRuntime,
)
from app.web.deps import CurrentClock, CurrentSettings, Cursor, Reads, Writes

# -- schedules --------------------------------------------------------------------------------------


LOCATIONS_MAX = 100
"""Matches a location search answers at most (it is not paged: refine ``q`` instead)."""


@get("/locations")
async def search_locations(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    q: Annotated[str, QueryParameter(max_length=200, description="Part of a name.")] = "",
    limit: Annotated[
        int, QueryParameter(schema_extra={"minimum": 1, "maximum": LOCATIONS_MAX})
    ] = 20,
) -> list[LocationOut]:
    """The provider's locations whose name matches ``q``, case and accents ignored (countries
    first); a schedule's ``location_code`` must be one of them. The first search syncs the
    provider's list (RT-60)."""
    checked_limit(limit, LOCATIONS_MAX)
    deps = RankTrackingDeps.of(runtime)
    await location_sync.ensure_synced(deps)
    async with deps.db.read() as session:
        found = await locations.search(session, q, limit=limit)
    return [
        LocationOut(
            location_code=loc.code,
            location_name=loc.name,
            country_iso_code=loc.country_iso,
            location_type=loc.kind,
            parent_code=loc.parent,
        )
        for loc in found
    ]


@get("/schedules")
async def get_schedules(
    principal: CurrentPrincipal,
    session: Reads,
    clock: CurrentClock,
    include_archived: FromQuery[bool] = False,
) -> list[ScheduleOut]:
    now = clock.now()
    rows = await lookup.list_schedules(
        session, principal.workspace_id, include_archived=include_archived
    )
    return [await schedule_out(session, s, now) for s in rows]


@post("/schedules")
async def create_schedule(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    data: JSONBody[RankScheduleIn],
) -> Response[CreatedOut]:
    """Save the schedule and request its baseline; the response says what the baseline did."""

    pending: list[PendingLaunch] = []
    # First use of a code only the provider's full list knows: sync it before the transaction.
    await location_sync.ensure_known(RankTrackingDeps.of(runtime), data.location_code)

    async def action(uow: UnitOfWork) -> CreatedOut:
        schedule, launch = await creation.create_with_baseline_in(
            uow, RankTrackingDeps.of(runtime), principal, data
        )
        pending.append(launch)
        return CreatedOut(
            schedule=await schedule_out(uow.session, schedule, runtime.clock.now()),
            baseline=await launch_out(uow.session, launch.launch),
        )

    async def finish(out: CreatedOut) -> CreatedOut:
        # With a broker the baseline is published only now; answer what that did (RT-27).
        launch = await pending[0].hand_off()
        async with runtime.db.read() as session:
            schedule = await lookup.get_schedule(session, principal.workspace_id, out.schedule.id)
            return CreatedOut(
                schedule=await schedule_out(session, schedule, runtime.clock.now()),
                baseline=await launch_out(session, launch),
            )

    return await idempotent(request, principal, runtime, action, finish=finish)


@post("/estimate", status_code=200)
async def estimate_new(
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    data: JSONBody[RankScheduleIn],
) -> EstimateOut:
    """The admission estimate of a schedule not yet created (the wizard's live figure)."""
    return await estimates.estimate_new(session, settings.ranktracking, principal, data)


@get("/schedules/{schedule_id:int}")
async def get_schedule(
    principal: CurrentPrincipal, session: Reads, clock: CurrentClock, schedule_id: RowId
) -> ScheduleOut:
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await schedule_out(session, schedule, clock.now())


@patch("/schedules/{schedule_id:int}")
async def edit_schedule(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    schedule_id: RowId,
    data: JSONBody[ScheduleEdit],
) -> ScheduleOut:
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await edits.edit(uow.session, settings.ranktracking, schedule, data, clock.now())
    return await schedule_out(uow.session, schedule, clock.now())


@put("/schedules/{schedule_id:int}/keywords")
async def set_selection(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
    schedule_id: RowId,
    data: JSONBody[SelectionIn],
) -> ScheduleOut:
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await edits.set_selection(
        uow.session, settings.ranktracking, schedule, data.keywords, clock.now()
    )
    return await schedule_out(uow.session, schedule, clock.now())


@get("/schedules/{schedule_id:int}/estimate")
async def estimate_schedule(
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    schedule_id: RowId,
    queue: FromQuery[QueueName] = "standard",
) -> EstimateOut:
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await estimates.estimate_existing(session, settings.ranktracking, schedule, queue)


@post("/schedules/{schedule_id:int}/run", status_code=200)
async def run_schedule(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    schedule_id: RowId,
    data: JSONBody[RunNowIn],
    request: Request[Any, Any, Any],
) -> Response[LaunchOut]:
    """ "Run now" (standard) or "measure quickly" (priority); ``launched`` says what really went
    out and ``reason`` why nothing did."""

    pending: list[PendingLaunch] = []

    async def action(uow: UnitOfWork) -> LaunchOut:
        launch = await manual_runs.run_now_in(
            uow, RankTrackingDeps.of(runtime), principal, schedule_id, data.queue
        )
        pending.append(launch)
        return await launch_out(uow.session, launch.launch)

    async def finish(_: LaunchOut) -> LaunchOut:
        # With a broker the jobs are published only now; count what reached it (RT-26).
        launch = await pending[0].hand_off()
        async with runtime.db.read() as session:
            return await launch_out(session, launch)

    return await idempotent(request, principal, runtime, action, status_code=200, finish=finish)


async def _transition(
    principal: Principal, uow: UnitOfWork, clock: Clock, schedule_id: int, action: Any
) -> ScheduleOut:
    schedule = await lookup.lock_schedule(uow.session, principal.workspace_id, schedule_id)
    await action(uow.session, schedule, clock.now())
    out: ScheduleOut = await schedule_out(uow.session, schedule, clock.now())
    return out


@post("/schedules/{schedule_id:int}/pause", status_code=200)
async def pause_schedule(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, schedule_id: RowId
) -> ScheduleOut:
    return await _transition(principal, uow, clock, schedule_id, lifecycle.pause)


@post("/schedules/{schedule_id:int}/resume", status_code=200)
async def resume_schedule(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, schedule_id: RowId
) -> ScheduleOut:
    return await _transition(principal, uow, clock, schedule_id, lifecycle.resume)


@post("/schedules/{schedule_id:int}/end", status_code=200)
async def end_schedule(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, schedule_id: RowId
) -> ScheduleOut:
    return await _transition(principal, uow, clock, schedule_id, lifecycle.end)


@get("/schedules/{schedule_id:int}/mobile-draft")
async def mobile_draft(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId
) -> RankScheduleIn:
    """A new mobile schedule pre-filled from this one, to POST to ``/schedules`` (RT-17)."""
    schedule = await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return drafts.mobile_draft(schedule)


@get("/schedules/{schedule_id:int}/log")
async def get_log(
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: RowId,
    cursor: Cursor = None,
) -> LogOut:
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await schedule_log(session, schedule_id, before_id=cursor_number(cursor))


@get("/schedules/{schedule_id:int}/results")
async def get_results(
    principal: CurrentPrincipal, session: Reads, schedule_id: RowId
) -> list[ResultOut]:
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await latest_results(session, schedule_id)


@get("/schedules/{schedule_id:int}/history")
async def get_history(
    principal: CurrentPrincipal,
    session: Reads,
    schedule_id: RowId,
    keyword: FromQuery[str],
) -> KeywordHistoryOut:
    await lookup.get_schedule(session, principal.workspace_id, schedule_id)
    return await keyword_history(session, schedule_id, " ".join(keyword.split()).casefold())


@get("/runs/{run_id:int}/results")
async def get_run_results(
    principal: CurrentPrincipal, session: Reads, run_id: RowId
) -> list[ResultOut]:
    run = await session.get(Run, run_id)
    if run is None or run.workspace_id != principal.workspace_id:
        raise RunNotFound("run not found")
    return await run_results(session, run_id)


ROUTERS: list[Any] = [
    api_router(
        "/ranktracking",
        [
            *ranktracking_lists.HANDLERS,
            search_locations,
            get_schedules,
            create_schedule,
            estimate_new,
            get_schedule,
            edit_schedule,
            set_selection,
            estimate_schedule,
            run_schedule,
            pause_schedule,
            resume_schedule,
            end_schedule,
            mobile_draft,
            get_log,
            get_results,
            get_history,
            get_run_results,
            *ranktracking_money.HANDLERS,
            *ranktracking_reports.HANDLERS,
        ],
    )
]
