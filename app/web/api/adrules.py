"""Ad rules JSON API: rules and their tasks, and the batch log, with the Meta token and ad
accounts (:mod:`.adrules_accounts`) under one router. Every query is scoped to the caller's
workspace; another workspace's id answers 404. The Meta token is write-only: no response ever
carries it (spec AR-24)."""

from __future__ import annotations

from datetime import datetime

from litestar import Response, delete, get, post, put
from litestar.params import FromPath, FromQuery, JSONBody

from app.db.session import ReadSession, UnitOfWork
from app.engines.adrules import rule_tasks, rule_views
from app.engines.adrules import rules as rule_service
from app.engines.adrules.catalogue import SCHEDULED_STATUSES, RuleStatus
from app.engines.adrules.claim.dispatch import dispatch_now
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.documents import load_approval, load_prefilters, load_schedule
from app.engines.adrules.models import Batch
from app.engines.adrules.schemas import (
    Approval,
    PreFilters,
    RuleIn,
    Schedule,
    StatusIn,
    TaskDocument,
    TaskIn,
)
from app.errors import Conflict
from app.pagination import Page, page_of
from app.runtime import Runtime
from app.schemas import Schema
from app.web.api import adrules_approvals, adrules_backtest, adrules_runs, adrules_stop
from app.web.api.adrules_accounts import (
    activate_account,
    deactivate_account,
    discover_accounts,
    get_account,
    get_meta_token,
    list_accounts,
    set_meta_token,
)
from app.web.api.common import Once, api_router
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import CurrentClock, Guard, Paging, Reads, Secrets, Writes


class RuleOut(Schema):
    id: int
    name: str
    status: str
    level: str
    account_ids: list[int]
    prefilters: PreFilters
    schedule: Schedule
    tasks: list[TaskDocument]
    next_execution_at: datetime | None
    last_dispatched_at: datetime | None
    last_batch_id: str | None
    last_batch_status: str | None
    created_at: datetime
    updated_at: datetime
    attribution_windows: list[str] | None = None
    """Meta's attribution windows the rule counts conversions with; null: each ad set's own
    setting (spec AR-41)."""
    approval: Approval | None = None
    """Set when the rule's changes wait for a member's approval."""


class BatchOut(Schema):
    id: int
    batch_id: str
    rule_id: int
    rule_name: str
    ad_account_id: int
    account_meta_id: str
    status: str
    entities: int
    pages: int
    fetch_attempts: int
    executed: int
    not_executed: int
    skipped: int
    errors: int
    shadow: bool
    """A shadow rule's run: ``executed`` counts what would have been done; nothing was written."""
    error: str | None
    tick_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    timezone: str | None = None
    """The IANA zone the run evaluated in (spec AR-44)."""


def rule_out(view: rule_views.RuleView) -> RuleOut:
    r = view.rule
    return RuleOut(
        id=r.id,
        name=r.name,
        status=r.status,
        level=r.level,
        account_ids=view.account_ids,
        prefilters=load_prefilters(r.prefilters),
        schedule=load_schedule(r.schedule),
        tasks=view.tasks,
        next_execution_at=r.next_execution_at,
        last_dispatched_at=r.last_dispatched_at,
        last_batch_id=r.last_batch_id,
        last_batch_status=view.last_batch_status,
        created_at=r.created_at,
        updated_at=r.updated_at,
        attribution_windows=r.attribution_windows,
        approval=load_approval(r.approval),
    )


def batch_out(b: Batch, rule_name: str) -> BatchOut:
    return BatchOut(
        id=b.id,
        batch_id=b.batch_id,
        rule_id=b.rule_id,
        rule_name=rule_name,
        ad_account_id=b.ad_account_id,
        account_meta_id=b.account_meta_id,
        status=b.status,
        entities=b.entities,
        pages=b.pages,
        fetch_attempts=b.fetch_attempts,
        executed=b.executed,
        not_executed=b.not_executed,
        skipped=b.skipped,
        errors=b.errors,
        shadow=b.shadow,
        error=b.error,
        tick_at=b.tick_at,
        created_at=b.created_at,
        started_at=b.started_at,
        finished_at=b.finished_at,
        timezone=b.timezone,
    )


# -- rules ----------------------------------------------------------------------------------------


async def _view(session: ReadSession, workspace_id: int, rule_id: int) -> RuleOut:
    return rule_out(await rule_views.view_rule(session, workspace_id=workspace_id, rule_id=rule_id))


@post("/rules", status_code=201)
async def create_rule(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    secrets: Secrets,
    guard: Guard,
    data: JSONBody[RuleIn],
) -> Response[RuleOut]:
    """Create a rule (honours ``Idempotency-Key``: a retry answers the rule first created)."""

    async def action(uow: UnitOfWork) -> RuleOut:
        rule = await rule_service.create_rule(
            uow.session,
            secrets,
            guard,
            workspace_id=principal.workspace_id,
            data=data,
            now=clock.now(),
        )
        return await _view(uow.session, principal.workspace_id, rule.id)

    return await once(action)


@get("/rules")
async def list_rules(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    status: FromQuery[RuleStatus | None] = None,
) -> Page[RuleOut]:
    views = await rule_views.list_rules(
        session,
        workspace_id=principal.workspace_id,
        status=status,
        after_id=paging.after,
        limit=paging.limit,
    )
    return page_of([rule_out(v) for v in views], paging.limit)


@get("/rules/{rule_id:int}")
async def get_rule(principal: CurrentPrincipal, session: Reads, rule_id: FromPath[int]) -> RuleOut:
    return await _view(session, principal.workspace_id, rule_id)


@put("/rules/{rule_id:int}")
async def replace_rule(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    guard: Guard,
    rule_id: FromPath[int],
    data: JSONBody[RuleIn],
) -> RuleOut:
    await rule_service.update_rule(
        uow.session,
        secrets,
        guard,
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        data=data,
        now=clock.now(),
    )
    return await _view(uow.session, principal.workspace_id, rule_id)


class RunNowOut(Schema, kw_only=True):
    batch_id: str | None
    """The dispatch's batch id (the rule log's detail), None when nothing was dispatched."""
    jobs: int
    skipped_accounts: int
    empty_accounts: int
    stopped: bool


async def run_rule_now(runtime: Runtime, workspace_id: int, rule_id: int) -> RunNowOut:
    """Dispatch an active or shadow rule once, now, through the sweep's own path (its schedule is
    kept); a shadow rule's run records what it would do and writes nothing."""
    async with runtime.db.read() as session:
        view = await rule_views.view_rule(session, workspace_id=workspace_id, rule_id=rule_id)
    if view.rule.status not in SCHEDULED_STATUSES:
        raise Conflict(
            f"the rule is {view.rule.status}: only an active or shadow rule runs (preview it "
            "instead)",
            code="rule_not_active",
        )
    summary = await dispatch_now(
        runtime.resources.require(AdRulesDeps),
        workspace_id=workspace_id,
        rule_id=rule_id,
        now=runtime.clock.now(),
    )
    return RunNowOut(
        batch_id=summary.batch_ids[0] if summary.batch_ids else None,
        jobs=summary.jobs,
        skipped_accounts=summary.skipped_accounts,
        empty_accounts=summary.empty_accounts,
        stopped=summary.stopped,
    )


@post("/rules/{rule_id:int}/run", status_code=200)
async def run_now(
    principal: CurrentPrincipal, runtime: CurrentRuntime, rule_id: FromPath[int]
) -> RunNowOut:
    """ "Run now": one dispatch outside the schedule, recorded like any other."""
    return await run_rule_now(runtime, principal.workspace_id, rule_id)


@post("/rules/{rule_id:int}/status", status_code=200)
async def change_status(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    rule_id: FromPath[int],
    data: JSONBody[StatusIn],
) -> RuleOut:
    await rule_service.set_status(
        uow.session,
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        status=data.status,
        now=clock.now(),
    )
    return await _view(uow.session, principal.workspace_id, rule_id)


@delete("/rules/{rule_id:int}", status_code=200)
async def archive_rule(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, rule_id: FromPath[int]
) -> RuleOut:
    """Archive (rules are kept with their batch log; an archived rule never runs)."""
    await rule_service.set_status(
        uow.session,
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        status="archived",
        now=clock.now(),
    )
    return await _view(uow.session, principal.workspace_id, rule_id)


# -- tasks ----------------------------------------------------------------------------------------


@get("/rules/{rule_id:int}/tasks")
async def list_tasks(
    principal: CurrentPrincipal, session: Reads, rule_id: FromPath[int]
) -> list[TaskDocument]:
    return (await _view(session, principal.workspace_id, rule_id)).tasks


@post("/rules/{rule_id:int}/tasks", status_code=201)
async def add_task(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    rule_id: FromPath[int],
    data: JSONBody[TaskIn],
) -> TaskDocument:
    task = await rule_tasks.add_task(
        uow.session,
        secrets,
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        task=data,
        now=clock.now(),
    )
    tasks = (await _view(uow.session, principal.workspace_id, rule_id)).tasks
    return next(t for t in tasks if t.id == task.id)


@put("/rules/{rule_id:int}/tasks/{task_id:int}")
async def replace_task(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    rule_id: FromPath[int],
    task_id: FromPath[int],
    data: JSONBody[TaskIn],
) -> TaskDocument:
    await rule_tasks.update_task(
        uow.session,
        secrets,
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        task_id=task_id,
        task=data,
        now=clock.now(),
    )
    tasks = (await _view(uow.session, principal.workspace_id, rule_id)).tasks
    return next(t for t in tasks if t.id == task_id)


@delete("/rules/{rule_id:int}/tasks/{task_id:int}", status_code=204)
async def remove_task(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    rule_id: FromPath[int],
    task_id: FromPath[int],
) -> None:
    await rule_tasks.remove_task(
        uow.session,
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        task_id=task_id,
        now=clock.now(),
    )


# -- batch log ------------------------------------------------------------------------------------


@get("/batches")
async def list_batches(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    rule_id: FromQuery[int | None] = None,
) -> Page[BatchOut]:
    """Batch records newest first (one per dispatch and ad account)."""
    rows = await rule_views.list_batches(
        session,
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        before_id=paging.after,
        limit=paging.limit,
    )
    return page_of([batch_out(b, name) for b, name in rows], paging.limit)


ROUTERS = [
    api_router(
        "/adrules",
        [
            set_meta_token,
            get_meta_token,
            discover_accounts,
            list_accounts,
            get_account,
            activate_account,
            deactivate_account,
            create_rule,
            list_rules,
            get_rule,
            replace_rule,
            change_status,
            run_now,
            archive_rule,
            list_tasks,
            add_task,
            replace_task,
            remove_task,
            list_batches,
        ],
        tag="adrules",
    ),
    # The rule log's detail, the preview and the templates (worker side of the engine).
    *adrules_runs.ROUTERS,
    # The platform stop's runtime switches.
    *adrules_stop.ROUTERS,
    # The backtest over past Insights (reads only).
    *adrules_backtest.ROUTERS,
    # A run's proposals, approved or rejected (rules that require approval).
    *adrules_approvals.ROUTERS,
]
