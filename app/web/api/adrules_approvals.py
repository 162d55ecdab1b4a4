"""Ad rules JSON API: a run's proposals, approved or rejected by a member (spec AR-28).

Proposals are addressed by the run's batch record (``/batches/{id}``, as in the rule log);
another workspace's batch answers 404. Approving carries the changes out at once through the
work path (re-read, re-plan, guards, stop before each write) and answers what happened to each.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import get, post
from litestar.params import FromPath, JSONBody

from app.engines.adrules import records as record_service
from app.engines.adrules.approvals import decide
from app.engines.adrules.approvals.queries import proposals_page
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.notify_models import Proposal
from app.pagination import Page, page_of
from app.platform.audit.origin import actor_of
from app.platform.service import Principal
from app.schemas import MAX_ITEMS, RowRef, Schema
from app.web.api.common import api_router, principal_tag
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import Paging, Reads, paging


class ProposalOut(Schema):
    id: int
    task_id: int
    campaign_id: str
    campaign_name: str
    action: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    status: str
    """``pending``, ``approved`` (being carried out), ``executed``, ``skipped``, ``failed``,
    ``rejected`` or ``expired``."""
    reason: str | None
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None


class DecideIn(Schema, kw_only=True):
    proposal_ids: Annotated[list[RowRef], msgspec.Meta(max_length=MAX_ITEMS)] | None = None
    """Only these proposals of the run; left out: every pending one."""


class DecisionOut(Schema):
    claimed: int
    """Pending proposals this call took (0 when another approval or the window came first)."""
    executed: int
    skipped: int
    failed: int
    rejected: int
    reasons: dict[str, str]
    """Per object id, why it was skipped or failed."""


def proposal_out(p: Proposal) -> ProposalOut:
    return ProposalOut(
        id=p.id,
        task_id=p.task_id,
        campaign_id=p.campaign_id,
        campaign_name=p.campaign_name,
        action=p.action,
        before=p.before,
        after=p.after,
        status=p.status,
        reason=p.reason,
        expires_at=p.expires_at,
        decided_by=p.decided_by,
        decided_at=p.decided_at,
    )


def decision_out(d: decide.Decision) -> DecisionOut:
    return DecisionOut(
        claimed=d.claimed,
        executed=d.executed,
        skipped=d.skipped,
        failed=d.failed,
        rejected=d.rejected,
        reasons=d.reasons or {},
    )


def decided_by(principal: Principal) -> str:
    return principal_tag(principal)


@get("/batches/{batch_record_id:int}/proposals", dependencies={"paging": paging(default=100)})
async def list_proposals(
    principal: CurrentPrincipal, session: Reads, batch_record_id: FromPath[int], paging: Paging
) -> Page[ProposalOut]:
    """The changes the run proposed, in the order it proposed them, with their decision."""
    summary = await record_service.get_batch(session, principal.workspace_id, batch_record_id)
    rows = await proposals_page(
        session,
        principal.workspace_id,
        summary.batch.batch_id,
        after_id=paging.after,
        limit=paging.limit,
    )
    return page_of([proposal_out(p) for p in rows], paging.limit)


async def _batch_id(runtime: Any, workspace_id: int, batch_record_id: int) -> str:
    async with runtime.db.read() as session:
        summary = await record_service.get_batch(session, workspace_id, batch_record_id)
    return summary.batch.batch_id


@post("/batches/{batch_record_id:int}/approve", status_code=200)
async def approve(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    batch_record_id: FromPath[int],
    data: JSONBody[DecideIn | None] = None,
) -> DecisionOut:
    """Approve the run's pending proposals (or those named) and carry them out; each proposal
    is carried out once, however many approvals arrive."""
    batch_id = await _batch_id(runtime, principal.workspace_id, batch_record_id)
    decision = await decide.approve(
        runtime.resources.require(AdRulesDeps),
        workspace_id=principal.workspace_id,
        batch_id=batch_id,
        decided_by=decided_by(principal),
        proposal_ids=data.proposal_ids if data else None,
        actor=actor_of(principal),
    )
    return decision_out(decision)


@post("/batches/{batch_record_id:int}/reject", status_code=200)
async def reject(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    batch_record_id: FromPath[int],
    data: JSONBody[DecideIn | None] = None,
) -> DecisionOut:
    """Reject the run's pending proposals (or those named): nothing is written."""
    batch_id = await _batch_id(runtime, principal.workspace_id, batch_record_id)
    decision = await decide.reject(
        runtime.resources.require(AdRulesDeps),
        workspace_id=principal.workspace_id,
        batch_id=batch_id,
        decided_by=decided_by(principal),
        proposal_ids=data.proposal_ids if data else None,
        actor=actor_of(principal),
    )
    return decision_out(decision)


ROUTERS = [api_router("/adrules", [list_proposals, approve, reject], tag="adrules")]
