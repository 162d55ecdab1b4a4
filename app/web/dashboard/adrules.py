"""Ad rules dashboard pages: rules (status, next run, last batch), the rule editor with validation
messages beside the fields and the batch log; ad accounts and the Meta connection are in
:mod:`.adrules_accounts`.

The editor posts a plain form; it is turned into the same :class:`RuleIn` the JSON API takes
(:mod:`.adrules_rule_form`) and goes through the same services, so a rule is valid in one place or
in neither.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get, post
from litestar.params import FromPath
from litestar.response import Redirect, Template

from app.clock import Clock
from app.db.session import ReadSession, UnitOfWork
from app.engines.adrules import accounts as account_service
from app.engines.adrules import rule_views, stops
from app.engines.adrules import rules as rule_service
from app.engines.adrules.catalogue import (
    COOLDOWN_LABELS,
    EFFECTIVE_STATUSES,
    LEVELS,
    RULE_STATUSES,
    WEEKDAYS,
)
from app.engines.adrules.connection import service as connection_service
from app.engines.adrules.templates import FromTemplateIn, get_template
from app.engines.adrules.validation import check_rule
from app.errors import ValidationFailed
from app.integrations.http_guard import AddressGuard
from app.platform.crypto import SecretBox
from app.platform.service import Principal
from app.web.api import adrules_stop as stop_api
from app.web.api.adrules import run_rule_now as run_now_service
from app.web.api.adrules_stop import StopIn
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard import adrules_accounts, adrules_backtest, adrules_log
from app.web.dashboard import adrules_rule_form as rule_form
from app.web.dashboard.common import page
from app.web.deps import CurrentClock, CurrentSettings, Guard, Reads, Secrets, Writes

AnyRequest = Request[Any, Any, Any]

NAV: list[tuple[str, str]] = [("/ui/adrules", "Ad rules"), *adrules_log.NAV]
"""(href, label) links this engine adds to the navigation bar."""


async def _editor(
    request: AnyRequest,
    principal: Principal,
    session: ReadSession,
    *,
    rule_id: int | None,
    values: dict[str, Any],
    errors: dict[str, str],
    view: rule_views.RuleView | None = None,
) -> Template:
    accounts = await account_service.list_accounts(session, principal.workspace_id)
    shown = rule_form.shown_errors(errors)
    template = page(
        request,
        "adrules/rule_edit.html",
        principal,
        rule_id=rule_id,
        view=view,
        values=values,
        errors=rule_form.errors_by_input(shown),
        task_errors={k: v for k, v in shown.items() if k.startswith("tasks")},
        catalogue=rule_form.builder_catalogue(),
        accounts=accounts,
        statuses=RULE_STATUSES,
        levels=LEVELS,
        effective_statuses=EFFECTIVE_STATUSES,
        weekdays=WEEKDAYS,
        cooldowns=COOLDOWN_LABELS,
        saved=request.query_params.get("saved") == "1" and not errors,
    )
    if errors:
        template.status_code = 422
    return template


# -- rules ----------------------------------------------------------------------------------------


@get("/ui/adrules")
async def rules_page(
    request: AnyRequest,
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    clock: CurrentClock,
) -> Template:
    views = await rule_views.list_rules(session, workspace_id=principal.workspace_id, limit=200)
    has_token = await account_service.has_token(session, principal.workspace_id)
    now = clock.now()
    connection = await connection_service.connection_view(session, principal.workspace_id, now=now)
    stop = await stops.stop_state(session, principal.workspace_id, settings.sweepers.stop_all)
    return page(
        request,
        "adrules/rules.html",
        principal,
        views=views[:200],
        has_token=has_token,
        connection=connection,
        now=now,
        stop=stop,
    )


@post("/ui/adrules/rules/{rule_id:int}/run")
async def run_rule_now(
    principal: CurrentPrincipal, runtime: CurrentRuntime, rule_id: FromPath[int]
) -> Redirect:
    """The rule page's "Run now" button: dispatch once, then show the rule's runs."""
    await run_now_service(runtime, principal.workspace_id, rule_id)
    return Redirect(f"/ui/adrules/log?rule_id={rule_id}")


@post("/ui/adrules/stop")
async def change_stop(
    request: AnyRequest,
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    settings: CurrentSettings,
) -> Redirect:
    """The runtime stop switch (AR-23): an admin turns the workspace's or the organisation's on
    or off."""
    form = await request.form()
    scope = form.get("scope", "")
    if scope != "organisation" and scope != "workspace":
        raise ValidationFailed.field("scope", "must be 'organisation' or 'workspace'")
    data = StopIn(
        scope="organisation" if scope == "organisation" else "workspace",
        stopped=form.get("stopped", "") == "true",
        reason=str(form.get("reason", ""))[:500],
    )
    await stop_api.apply_stop(
        uow, principal, data, now=clock.now(), stop_all=settings.sweepers.stop_all
    )
    return Redirect("/ui/adrules")


@get("/ui/adrules/rules/new")
async def new_rule_page(
    request: AnyRequest, principal: CurrentPrincipal, session: Reads
) -> Template:
    values: dict[str, Any] = {
        "status": "draft",
        "level": "campaign",
        "mode": "interval",
        "minutes": 60,
        "week": {},
        "tasks_json": rule_form.pretty(rule_form.EXAMPLE_TASKS),
        "account_ids": [],
        "status_values": [],
        "status_operator": "in",
    }
    key = request.query_params.get("template")
    if key:
        # A template opens in the builder with its default thresholds, saved only when asked.
        account = request.query_params.get("account_id", "")
        draft = get_template(key).rule(
            FromTemplateIn(account_ids=[int(account)] if account.isdigit() else [])
        )
        values = rule_form.values_from_rule_in(draft)
    return await _editor(request, principal, session, rule_id=None, values=values, errors={})


@get("/ui/adrules/rules/{rule_id:int}")
async def edit_rule_page(
    request: AnyRequest,
    principal: CurrentPrincipal,
    session: Reads,
    rule_id: FromPath[int],
) -> Template:
    view = await rule_views.view_rule(session, workspace_id=principal.workspace_id, rule_id=rule_id)
    return await _editor(
        request,
        principal,
        session,
        rule_id=rule_id,
        values=rule_form.values_from_view(view),
        errors={},
        view=view,
    )


async def _save(
    request: AnyRequest,
    principal: Principal,
    uow: UnitOfWork,
    machinery: tuple[SecretBox, AddressGuard, Clock],
    rule_id: int | None,
) -> Template | Redirect:
    secrets, guard, clock = machinery
    form = await request.form()
    document, errors = rule_form.form_to_rule(form)
    if not str(document["name"]).strip():
        # Reported here so the rest of the rule is still checked and every message shows at once.
        errors["name"] = "must not be blank"
        document["name"] = "untitled"
    try:
        data = rule_form.parse_rule(document)
        try:
            check_rule(data)
        except ValidationFailed as exc:
            errors = {**rule_form.field_errors(exc), **errors}
        if not errors:
            async with uow.attempt():
                if rule_id is None:
                    rule = await rule_service.create_rule(
                        uow.session,
                        secrets,
                        guard,
                        workspace_id=principal.workspace_id,
                        data=data,
                        now=clock.now(),
                    )
                    rule_id = rule.id
                else:
                    await rule_service.update_rule(
                        uow.session,
                        secrets,
                        guard,
                        workspace_id=principal.workspace_id,
                        rule_id=rule_id,
                        data=data,
                        now=clock.now(),
                    )
            return Redirect(f"/ui/adrules/rules/{rule_id}?saved=1")
    except ValidationFailed as exc:
        errors = {**rule_form.field_errors(exc), **errors}
    return await _editor(
        request,
        principal,
        uow.session,
        rule_id=rule_id,
        values=rule_form.values_from_form(form),
        errors=errors,
    )


@post("/ui/adrules/rules")
async def create_rule(
    request: AnyRequest,
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
) -> Template | Redirect:
    return await _save(request, principal, uow, (secrets, guard, clock), None)


@post("/ui/adrules/rules/{rule_id:int}")
async def update_rule(
    request: AnyRequest,
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
    rule_id: FromPath[int],
) -> Template | Redirect:
    # 404 for another workspace's rule
    await rule_views.view_rule(uow.session, workspace_id=principal.workspace_id, rule_id=rule_id)
    return await _save(request, principal, uow, (secrets, guard, clock), rule_id)


# -- batch log ------------------------------------------------------------------------------------


@get("/ui/adrules/batches")
async def batches_page(
    request: AnyRequest, principal: CurrentPrincipal, session: Reads
) -> Template:
    raw = request.query_params.get("rule_id")
    rule_id = int(raw) if raw and raw.isdigit() else None
    rows = await rule_views.list_batches(
        session, workspace_id=principal.workspace_id, rule_id=rule_id, limit=200
    )
    return page(request, "adrules/batches.html", principal, rows=rows[:200], rule_id=rule_id)


ROUTES: list[Any] = [
    rules_page,
    change_stop,
    run_rule_now,
    new_rule_page,
    edit_rule_page,
    create_rule,
    update_rule,
    batches_page,
    *adrules_accounts.ROUTES,
    *adrules_log.ROUTES,
    *adrules_backtest.ROUTES,
]
"""Page handlers; they receive ``principal`` (signed-in person) and the request's dependencies
(:mod:`app.web.deps`)."""

PUBLIC_ROUTES: list[Any] = []
"""Handlers reachable without signing in (hosted forms, tracking, snippets)."""
