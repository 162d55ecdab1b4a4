"""Ad rules JSON API, worker side: the rule log's batch detail and records (spec AR-18, AR-25),
the preview of a rule on one ad account (AR-4), and the shipped templates (AR-3).

Every query is scoped to the caller's workspace; another workspace's ids answer 404. The per-step
timeline of a record is shown to workspace admins only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from litestar import Response, get, post
from litestar.params import FromPath, JSONBody, Parameter

from app.db.session import ReadSession, UnitOfWork
from app.engines.adrules import records as record_service
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.run_models import RECORD_STATUSES, ExecutionRecord
from app.engines.adrules.templates import (
    TEMPLATES,
    FromTemplateIn,
    TemplateParams,
    create_from_template,
)
from app.engines.adrules.work.preview import PreviewResult, preview_rule
from app.errors import ValidationFailed
from app.pagination import Page, page_of
from app.pagination import Paging as PagingValue
from app.platform.service import Principal
from app.runtime import Runtime
from app.schemas import RowRef, Schema
from app.web.api.common import Once, api_router
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import CurrentClock, Guard, Paging, Reads, Secrets, paging


class AdRuleStepOut(Schema):
    step: str
    seconds: float


class ConditionOut(Schema):
    text: str
    seen: str | None
    compared: str | None
    passed: bool
    reason: str | None = None
    source: str | None = None
    """A custom metric's rows: ``live``, ``cache`` or ``copy`` (the database copy of the sheet,
    used when the live read failed)."""
    source_age_seconds: int | None = None
    """How old those rows were when the condition was evaluated."""
    source_note: str | None = None
    """Why the database copy was used."""
    sheet_failed: bool = False
    """The sheet could be read neither live nor from a usable copy (the record is an error)."""


class RecordOut(Schema):
    id: int
    task_id: int
    task_name: str
    campaign_id: str
    campaign_name: str
    action: str
    status: str
    reason: str | None
    parameters: dict[str, Any]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    conditions: list[ConditionOut]
    elapsed_seconds: float
    steps: list[AdRuleStepOut] | None
    """The per-step timeline; ``null`` unless the caller is a workspace admin."""
    next_permitted_at: datetime | None
    batch_id: str
    created_at: datetime
    timezone: str | None = None
    """The IANA zone the run evaluated in (spec AR-44)."""
    attribution: str | None = None
    """``unified`` or the attribution windows the Insights were read with (spec AR-41)."""


class BatchDetailOut(Schema):
    id: int
    batch_id: str
    rule_id: int
    rule_name: str
    ad_account_id: int
    account_meta_id: str
    account_name: str
    status: str
    entities: int
    executed: int
    not_executed: int
    skipped: int
    errors: int
    shadow: bool
    """A shadow rule's run: ``executed`` counts what would have been done; nothing was written."""
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    timezone: str | None = None
    """The IANA zone the run evaluated in (spec AR-44)."""


class PreviewIn(Schema):
    account_id: RowRef


class TemplateOut(Schema):
    key: str
    title: str
    description: str
    defaults: TemplateParams


class CreatedRule(Schema):
    id: int
    name: str
    status: str
    template: str


def record_out(r: ExecutionRecord, task_name: str, *, with_steps: bool) -> RecordOut:
    return RecordOut(
        id=r.id,
        task_id=r.task_id,
        task_name=task_name,
        campaign_id=r.campaign_id,
        campaign_name=r.campaign_name,
        action=r.action,
        status=r.status,
        reason=r.reason,
        parameters=r.parameters,
        before=r.before,
        after=r.after,
        conditions=[
            ConditionOut(
                text=c["text"],
                seen=c["seen"],
                compared=c["compared"],
                passed=c["passed"],
                reason=c.get("reason"),
                source=c.get("source"),
                source_age_seconds=c.get("source_age_seconds"),
                source_note=c.get("source_note"),
                sheet_failed=bool(c.get("sheet_failed")),
            )
            for c in r.conditions
        ],
        elapsed_seconds=r.elapsed_seconds,
        steps=[AdRuleStepOut(step=s["step"], seconds=s["seconds"]) for s in r.steps]
        if with_steps
        else None,
        next_permitted_at=r.next_permitted_at,
        batch_id=r.batch_id,
        created_at=r.created_at,
        timezone=r.timezone,
        attribution=r.attribution,
    )


def batch_detail_out(summary: record_service.BatchSummary) -> BatchDetailOut:
    b = summary.batch
    return BatchDetailOut(
        id=b.id,
        batch_id=b.batch_id,
        rule_id=b.rule_id,
        rule_name=summary.rule_name,
        ad_account_id=b.ad_account_id,
        account_meta_id=b.account_meta_id,
        account_name=summary.account_name,
        status=b.status,
        entities=b.entities,
        executed=b.executed,
        not_executed=b.not_executed,
        skipped=b.skipped,
        errors=b.errors,
        shadow=b.shadow,
        error=b.error,
        created_at=b.created_at,
        started_at=b.started_at,
        finished_at=b.finished_at,
        timezone=b.timezone,
    )


async def load_records_page(
    session: ReadSession,
    principal: Principal,
    batch_record_id: int,
    *,
    status: str | None,
    paging: PagingValue,
) -> tuple[BatchDetailOut, Page[RecordOut]]:
    """The batch and one page of its records as the caller may see them (shared with the pages)."""
    if status is not None and status not in RECORD_STATUSES:
        raise ValidationFailed.field("status", f"must be one of {', '.join(RECORD_STATUSES)}")
    summary = await record_service.get_batch(session, principal.workspace_id, batch_record_id)
    rows = await record_service.records_page(
        session, summary.batch, status=status, after_id=paging.after, limit=paging.limit
    )
    names = await record_service.task_names(session, (r.task_id for r in rows))
    items = [record_out(r, names.get(r.task_id, ""), with_steps=principal.is_admin) for r in rows]
    return batch_detail_out(summary), page_of(items, paging.limit)


@get("/batches/{batch_record_id:int}")
async def get_batch(
    principal: CurrentPrincipal, session: Reads, batch_record_id: FromPath[int]
) -> BatchDetailOut:
    summary = await record_service.get_batch(session, principal.workspace_id, batch_record_id)
    return batch_detail_out(summary)


RecordStatus = Annotated[
    str | None,
    Parameter(
        description="Only the records of this status.",
        schema_extra={"enum": list(RECORD_STATUSES)},
    ),
]
"""A record status, documented as the statuses there are (any other answers 422)."""


@get("/batches/{batch_record_id:int}/records", dependencies={"paging": paging(default=100)})
async def list_batch_records(
    principal: CurrentPrincipal,
    session: Reads,
    batch_record_id: FromPath[int],
    paging: Paging,
    status: RecordStatus = None,
) -> Page[RecordOut]:
    """One record per campaign and task of this batch, in the order they were written."""
    _, page = await load_records_page(
        session, principal, batch_record_id, status=status, paging=paging
    )
    return page


def preview_deps(runtime: Runtime) -> AdRulesDeps:
    """The process's ad-rules dependencies (the preview shares the workers' clients and cache)."""
    return runtime.resources.require(AdRulesDeps)


@post("/rules/{rule_id:int}/preview", status_code=200)
async def preview(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    rule_id: FromPath[int],
    data: JSONBody[PreviewIn],
) -> PreviewResult:
    """Evaluate the rule now on one ad account; nothing is written anywhere."""
    return await preview_rule(
        preview_deps(runtime),
        workspace_id=principal.workspace_id,
        rule_id=rule_id,
        ad_account_id=data.account_id,
    )


@get("/templates")
async def list_templates() -> list[TemplateOut]:
    return [
        TemplateOut(key=t.key, title=t.title, description=t.description, defaults=t.defaults)
        for t in TEMPLATES.values()
    ]


TemplateKey = Annotated[
    str,
    Parameter(
        description="One of the templates ``GET /adrules/templates`` lists.",
        schema_extra={"enum": list(TEMPLATES)},
    ),
]
"""A template's key, documented as the list of keys there are (any other answers 404)."""


@post("/templates/{key:str}/rules", status_code=201)
async def create_rule_from_template(
    principal: CurrentPrincipal,
    once: Once,
    clock: CurrentClock,
    secrets: Secrets,
    guard: Guard,
    key: TemplateKey,
    data: JSONBody[FromTemplateIn],
) -> Response[CreatedRule]:
    """A new draft rule from a template (set it live with ``POST /rules/{id}/status``). Honours
    ``Idempotency-Key``: a retry answers the rule first created."""

    async def action(uow: UnitOfWork) -> CreatedRule:
        rule = await create_from_template(
            uow.session,
            secrets,
            guard,
            workspace_id=principal.workspace_id,
            key=key,
            data=data,
            now=clock.now(),
        )
        return CreatedRule(id=rule.id, name=rule.name, status=rule.status, template=key)

    return await once(action)


ROUTERS = [
    api_router(
        "/adrules",
        [get_batch, list_batch_records, preview, list_templates, create_rule_from_template],
        tag="adrules",
    )
]
