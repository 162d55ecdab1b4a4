"""Ad rules dashboard pages, worker side: the rule log (batches newest first with the run history
and, for one rule, its objects' budgets charted; a batch's records per task and campaign with the
budgets of the objects it changed; the per-step timeline only for workspace admins), the preview of
a rule on one ad account, and creating a draft rule from a template (spec AR-3, AR-4, AR-25)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.adrules import accounts as account_service
from app.engines.adrules import records as record_service
from app.engines.adrules import rule_views
from app.engines.adrules.approvals import decide
from app.engines.adrules.approvals.queries import run_proposals
from app.engines.adrules.notify_models import PROPOSAL_PENDING
from app.engines.adrules.templates import TEMPLATES, FromTemplateIn, create_from_template
from app.engines.adrules.work.preview import preview_rule
from app.errors import DomainError
from app.pagination import Paging as PageRequest
from app.pagination import page_of
from app.platform.audit.origin import actor_of
from app.platform.service import Principal
from app.web.api.adrules_runs import load_records_page, preview_deps
from app.web.api.common import principal_tag
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard import adrules_charts as charts
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Guard, Paging, Reads, Secrets, Writes, paging

LOG = "/ui/adrules/log"

NAV: list[tuple[str, str]] = [(LOG, "Rule log")]
"""(href, label) links these pages add to the navigation bar."""


async def _runs(
    session: ReadSession, principal: Principal, rule_id: int | None, paging: PageRequest
) -> dict[str, Any]:
    """What the log's runs part shows: a page of batches and their run-history chart."""
    rows = await record_service.list_batches(
        session,
        principal.workspace_id,
        rule_id=rule_id,
        before_id=paging.after,
        limit=paging.limit,
    )
    batches = page_of(rows, paging.limit, lambda row: row.batch.id)
    return {
        "batches": batches.items,
        "rule_id": rule_id,
        "limit": paging.limit,
        "next_cursor": batches.next_cursor,
        "history_chart": charts.run_history([r.batch for r in batches.items]),
        # Only the newest page refreshes itself: an older one would be replaced by the newest.
        "live": paging.after is None,
    }


@get(LOG)
async def log_list(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    rule_id: FromQuery[int | None] = None,
) -> Template:
    budget_chart = (
        await charts.rule_budget_chart(session, principal.workspace_id, rule_id)
        if rule_id is not None
        else None
    )
    return page(
        request,
        "adrules/log_list.html",
        principal,
        budget_chart=budget_chart,
        **await _runs(session, principal, rule_id, paging),
    )


@get(f"{LOG}/partials/runs")
async def log_runs_partial(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    rule_id: FromQuery[int | None] = None,
) -> Template:
    """The log's runs, refreshed in place while the newest page is open (AR-47)."""
    return page(
        request,
        "adrules/_log_runs.html",
        principal,
        **await _runs(session, principal, rule_id, paging),
    )


@get(f"{LOG}/{{batch_record_id:int}}", dependencies={"paging": paging(default=200)})
async def log_detail(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    batch_record_id: FromPath[int],
    paging: Paging,
    status: FromQuery[str | None] = None,
) -> Template:
    batch, records = await load_records_page(
        session, principal, batch_record_id, status=status or None, paging=paging
    )
    summary = await record_service.get_batch(session, principal.workspace_id, batch_record_id)
    budget_chart = await charts.batch_budget_chart(session, summary.batch)
    proposals = await run_proposals(session, principal.workspace_id, summary.batch.batch_id)
    by_task: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for record in records.items:
        by_task[(record.task_id, record.task_name)].append(record)
    return page(
        request,
        "adrules/log_detail.html",
        principal,
        batch=batch,
        tasks=sorted(by_task.items()),
        status=status or "",
        next_cursor=records.next_cursor,
        show_steps=principal.is_admin,
        budget_chart=budget_chart,
        pending=[p for p in proposals if p.status == PROPOSAL_PENDING],
        decided_proposals=[p for p in proposals if p.status != PROPOSAL_PENDING],
    )


async def _decide_run(
    runtime: Any, principal: Principal, batch_record_id: int, *, approve: bool
) -> Redirect:
    """The batch page's buttons: approve (carried out at once) or reject every pending change."""
    async with runtime.db.read() as session:
        summary = await record_service.get_batch(session, principal.workspace_id, batch_record_id)
    call: Any = decide.approve if approve else decide.reject
    await call(
        preview_deps(runtime),
        workspace_id=principal.workspace_id,
        batch_id=summary.batch.batch_id,
        decided_by=principal_tag(principal),
        actor=actor_of(principal),
    )
    return Redirect(f"{LOG}/{batch_record_id}")


@post(f"{LOG}/{{batch_record_id:int}}/approve")
async def approve_run(
    principal: CurrentPrincipal, runtime: CurrentRuntime, batch_record_id: FromPath[int]
) -> Redirect:
    return await _decide_run(runtime, principal, batch_record_id, approve=True)


@post(f"{LOG}/{{batch_record_id:int}}/reject")
async def reject_run(
    principal: CurrentPrincipal, runtime: CurrentRuntime, batch_record_id: FromPath[int]
) -> Redirect:
    return await _decide_run(runtime, principal, batch_record_id, approve=False)


@get("/ui/adrules/rules/{rule_id:int}/preview")
async def preview_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    rule_id: FromPath[int],
    account_id: FromQuery[int | None] = None,
) -> Template:
    # Its own read, closed before the preview asks Meta: no connection waits on the answer.
    async with runtime.db.read() as session:
        view = await rule_views.view_rule(
            session, workspace_id=principal.workspace_id, rule_id=rule_id
        )
        accounts = [
            a
            for a in await account_service.list_accounts(session, principal.workspace_id)
            if a.id in view.account_ids
        ]
    result, error = None, None
    chosen = account_id if account_id is not None else (accounts[0].id if accounts else None)
    if chosen is not None:
        try:
            result = await preview_rule(
                preview_deps(runtime),
                workspace_id=principal.workspace_id,
                rule_id=rule_id,
                ad_account_id=chosen,
            )
        except DomainError as exc:
            error = exc.message
    return page(
        request,
        "adrules/preview.html",
        principal,
        rule=view.rule,
        accounts=accounts,
        chosen=chosen,
        result=result,
        error=error,
    )


class TemplateForm(msgspec.Struct):
    name: str = ""
    account_id: str = ""
    """An ad account id, or empty for none yet."""


@get("/ui/adrules/templates")
async def templates_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    return await _templates(request, principal, session, error=None)


async def _templates(
    request: Request[Any, Any, Any], principal: Principal, session: ReadSession, error: str | None
) -> Template:
    accounts = [
        a for a in await account_service.list_accounts(session, principal.workspace_id) if a.active
    ]
    return page(
        request,
        "adrules/rule_templates.html",
        principal,
        templates=list(TEMPLATES.values()),
        accounts=accounts,
        error=error,
    )


@post("/ui/adrules/templates/{key:str}")
async def create_from_template_form(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
    key: FromPath[str],
    data: URLEncodedBody[TemplateForm],
) -> Redirect | Template:
    form = FromTemplateIn(
        name=data.name.strip() or None,
        account_ids=[int(data.account_id)] if data.account_id.isdigit() else [],
    )
    try:
        async with uow.attempt():
            rule = await create_from_template(
                uow.session,
                secrets,
                guard,
                workspace_id=principal.workspace_id,
                key=key,
                data=form,
                now=clock.now(),
            )
    except DomainError as exc:
        return await _templates(request, principal, uow.session, error=exc.message)
    return Redirect(f"/ui/adrules/rules/{rule.id}/preview")


ROUTES: list[Any] = [
    log_list,
    log_runs_partial,
    log_detail,
    approve_run,
    reject_run,
    preview_page,
    templates_page,
    create_from_template_form,
]
"""Page handlers; they receive ``principal`` (signed-in person) and the request's dependencies
(:mod:`app.web.deps`)."""
