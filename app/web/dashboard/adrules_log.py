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
from app.engines.adrules import rules as rule_service
from app.engines.adrules.templates import TEMPLATES, FromTemplateIn, create_from_template
from app.engines.adrules.work.preview import preview_rule
from app.errors import DomainError
from app.pagination import page_of
from app.platform.service import Principal
from app.web.api.adrules_runs import load_records_page, preview_deps
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard import adrules_charts as charts
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, Guard, Paging, Reads, Secrets, Writes, paging

LOG = "/ui/adrules/log"

NAV: list[tuple[str, str]] = [(LOG, "Rule log")]
"""(href, label) links these pages add to the navigation bar."""


@get(LOG)
async def log_list(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
    rule_id: FromQuery[int | None] = None,
) -> Template:
    rows = await record_service.list_batches(
        session,
        principal.workspace_id,
        rule_id=rule_id,
        before_id=paging.after,
        limit=paging.limit,
    )
    budget_chart = (
        await charts.rule_budget_chart(session, principal.workspace_id, rule_id)
        if rule_id is not None
        else None
    )
    batches = page_of(rows, paging.limit, lambda row: row.batch.id)
    return page(
        request,
        "adrules/log_list.html",
        principal,
        batches=batches.items,
        rule_id=rule_id,
        next_cursor=batches.next_cursor,
        history_chart=charts.run_history([r.batch for r in batches.items]),
        budget_chart=budget_chart,
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
    )


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
        view = await rule_service.view_rule(
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


ROUTES: list[Any] = [log_list, log_detail, preview_page, templates_page, create_from_template_form]
"""Page handlers; they receive ``principal`` (signed-in person) and the request's dependencies
(:mod:`app.web.deps`)."""
