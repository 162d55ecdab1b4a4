"""Position tracking JSON API under ``/api/v1/ranktracking``: keyword lists, schedules, estimates,
manual runs, pause/resume/end, the log and results, the balance, its ledger and the activity feed.

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
from app.engines.ranktracking import lists as list_service
from app.engines.ranktracking import location_sync, locations, money
from app.engines.ranktracking.claim.handoff import PendingLaunch
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.errors import RunNotFound
from app.engines.ranktracking.keyword_import import start_keyword_import
from app.engines.ranktracking.keywords import parse_import
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
    ActivityPage,
    BalanceOut,
    BulkAddOut,
    CreatedOut,
    EstimateOut,
    KeywordHistoryOut,
    KeywordImportIn,
    KeywordsIn,
    LaunchOut,
    LedgerPage,
    ListDetailOut,
    ListIn,
    ListOut,
    ListRename,
    ListWriteOut,
    LocationOut,
    LogOut,
    QueueName,
    RankScheduleIn,
    RemovedOut,
    ResultOut,
    RunNowIn,
    ScheduleEdit,
    ScheduleOut,
    SelectionIn,
    TopUpIn,
)
from app.pagination import checked_limit, cursor_number
from app.platform.service import Principal
from app.web.api import ranktracking_reports
from app.web.api.common import Once, RowId, api_router, idempotent
from app.web.api.jobs import BulkJobOut, bulk_job_out
from app.web.auth import (
    CurrentPrincipal,
    CurrentRuntime,
    require_organisation_manager,
)
from app.web.deps import CurrentClock, CurrentSettings, Cursor, Queue, Reads, Writes

# -- keyword lists ----------------------------------------------------------------------------------


@get("/lists")
async def get_lists(principal: CurrentPrincipal, session: Reads) -> list[ListOut]:
    return await list_service.all_lists(session, principal.workspace_id)


@post("/lists")
async def create_list(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    data: JSONBody[ListIn],
) -> Response[ListWriteOut]:
    async def action(uow: UnitOfWork) -> ListWriteOut:
        kl, report = await list_service.create_list(
            uow.session,
            workspace_id=principal.workspace_id,
            name=data.name,
            keywords=data.keywords,
            now=clock.now(),
        )
        return ListWriteOut(list=await list_service.list_out(uow.session, kl), report=report)

    return await once(action)


@get("/lists/{list_id:int}")
async def get_list(principal: CurrentPrincipal, session: Reads, list_id: RowId) -> ListDetailOut:
    kl = await list_service.get_list(session, principal.workspace_id, list_id)
    return await list_service.detail_out(session, kl)


@patch("/lists/{list_id:int}")
async def rename_list(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[ListRename],
) -> ListOut:
    kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
    await list_service.rename_list(uow.session, kl, data.name, clock.now())
    return await list_service.list_out(uow.session, kl)


@post("/lists/{list_id:int}/keywords")
async def add_keywords(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[KeywordsIn],
) -> Response[BulkAddOut]:
    async def action(uow: UnitOfWork) -> BulkAddOut:
        kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
        return await list_service.add_keywords(uow.session, kl, data.keywords, now=clock.now())

    return await once(action)


@post("/lists/{list_id:int}/keywords/remove")
async def remove_keywords(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[KeywordsIn],
) -> RemovedOut:
    kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
    return await list_service.remove_keywords(uow.session, kl, data.keywords, now=clock.now())


@post("/lists/{list_id:int}/import")
async def import_keywords(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    list_id: RowId,
    data: JSONBody[KeywordImportIn],
) -> Response[BulkAddOut]:
    """One keyword a line (``text``) or the first column of a CSV (``csv``)."""

    async def action(uow: UnitOfWork) -> BulkAddOut:
        kl = await list_service.get_list(uow.session, principal.workspace_id, list_id)
        return await list_service.add_keywords(
            uow.session, kl, parse_import(data.text, fmt=data.format), now=clock.now()
        )

    return await once(action)


@post("/lists/{list_id:int}/import-jobs", status_code=202)
async def import_keywords_in_background(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    job_queue: Queue,
    list_id: RowId,
    data: JSONBody[KeywordImportIn],
) -> Response[BulkJobOut]:
    """The same import as a background job, in bounded chunks: answers 202 with the job; poll
    its ``url`` for progress and the per-entry report. The list, an empty import and one larger
    than a list can hold are checked first (404/422, nothing written)."""

    async def action(uow: UnitOfWork) -> BulkJobOut:
        job = await start_keyword_import(
            uow,
            job_queue,
            workspace_id=principal.workspace_id,
            list_id=list_id,
            text=data.text,
            fmt=data.format,
            now=clock.now(),
        )
        return bulk_job_out(job, [])

    return await once(action, status_code=202)


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


# -- money and activity -----------------------------------------------------------------------------


@get("/balance")
async def get_balance(principal: CurrentPrincipal, session: Reads) -> BalanceOut:
    return await money.balance_out(session, principal.organisation_id)


@post("/balance/top-ups")
async def top_up(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    data: JSONBody[TopUpIn],
) -> Response[BalanceOut]:
    require_organisation_manager(principal)

    async def action(uow: UnitOfWork) -> BalanceOut:
        await money.top_up(
            uow.session,
            organisation_id=principal.organisation_id,
            workspace_id=principal.workspace_id,
            amount_eur=data.amount_eur,
            note=data.note,
            now=clock.now(),
        )
        return await money.balance_out(uow.session, principal.organisation_id)

    return await once(action)


@get("/ledger")
async def get_ledger(
    principal: CurrentPrincipal, session: Reads, cursor: Cursor = None
) -> LedgerPage:
    return await money.ledger_page(session, principal.organisation_id, cursor)


@get("/activity")
async def get_activity(
    principal: CurrentPrincipal,
    session: Reads,
    cursor: Cursor = None,
    schedule_id: FromQuery[int | None] = None,
) -> ActivityPage:
    return await money.activity_page(
        session, principal.workspace_id, cursor, schedule_id=schedule_id
    )


ROUTERS: list[Any] = [
    api_router(
        "/ranktracking",
        [
            get_lists,
            create_list,
            get_list,
            rename_list,
            add_keywords,
            remove_keywords,
            import_keywords,
            import_keywords_in_background,
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
            get_balance,
            top_up,
            get_ledger,
            get_activity,
            *ranktracking_reports.HANDLERS,
        ],
    )
]
