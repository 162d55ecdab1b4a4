"""Funnels API: draft a funnel from a description with the workspace's AI provider (FN-34 to
FN-36), and read the record a drafted funnel keeps. The answer is a draft: publishing it is the
ordinary ``POST /api/v1/funnels/{id}/publish``, through the validator again."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import get, post
from litestar.params import FromPath, JSONBody

from app.engines.funnels.drafting import service as drafting
from app.engines.funnels.drafting.models import AiDraft
from app.engines.funnels.drafting.prompt import Channel, DraftRequest
from app.errors import ValidationFailed
from app.runtime import Runtime
from app.schemas import MAX_ITEMS, Key, Schema
from app.web.api.common import api_router
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.deps import Guard, Reads

Json = Annotated[dict[Key, Any], msgspec.Meta(max_length=MAX_ITEMS)]


class AiDraftIn(Schema, kw_only=True):
    """The body of ``POST /api/v1/funnels/ai-drafts``: the trigger and audience arrive as bounded
    JSON objects and are decoded by the definition's own types (:class:`DraftRequest`)."""

    description: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    name: Annotated[str, msgspec.Meta(max_length=200)] = ""
    trigger: Json
    audience: Json | None = None
    channels: Annotated[list[Channel], msgspec.Meta(min_length=1, max_length=4)] = msgspec.field(
        default_factory=lambda: ["email"]
    )

    def request(self) -> DraftRequest:
        try:
            return msgspec.convert(msgspec.to_builtins(self), DraftRequest)
        except msgspec.ValidationError as exc:
            raise ValidationFailed.field("body", str(exc)) from None


class AiDraftOut(Schema):
    funnel_id: int
    outcome: str
    """``valid``, ``repaired`` (valid after repair rounds) or ``invalid`` (findings remain)."""
    description: str
    constraints: dict[str, Any]
    model: str
    endpoint: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    rounds: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    """The validator's findings on the draft, each with its node, rule and message."""
    simulation: dict[str, Any]
    """Sample contacts walked through the draft."""
    created_at: datetime
    editor_url: str


def deps_of(runtime: Runtime, guard: Any) -> drafting.DraftingDeps:
    return drafting.DraftingDeps(
        db=runtime.db,
        secrets=runtime.secrets,
        guard=guard,
        clock=runtime.clock,
        settings=runtime.settings.funnels,
        user_agent=runtime.settings.integrations.user_agent,
    )


def _out(row: AiDraft) -> AiDraftOut:
    view = drafting.record_view(row)
    return AiDraftOut(
        **{**view, "created_at": row.created_at},
        editor_url=f"/ui/funnels/{row.funnel_id}",
    )


@post("/ai-drafts", status_code=201)
async def draft_with_ai(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    guard: Guard,
    data: JSONBody[AiDraftIn],
) -> AiDraftOut:
    """Ask the workspace's AI provider for a funnel from ``description``, check it with the
    validator (repairing up to ``FUNNEL_AI_DRAFT_REPAIR_ROUNDS`` times) and store it as a new
    funnel's draft, never published. 409 ``ai_provider_missing``, 429 ``ai_quota_exhausted``,
    502 ``ai_draft_failed``: nothing was written."""
    row = await drafting.draft_funnel(
        deps_of(runtime, guard), principal.workspace_id, data.request(), user_id=principal.user_id
    )
    return _out(row)


@get("/{funnel_id:int}/ai-draft")
async def show_ai_draft(
    principal: CurrentPrincipal, session: Reads, funnel_id: FromPath[int]
) -> AiDraftOut:
    """What a funnel drafted with AI was drafted from: prompt, model, endpoint, tokens, rounds,
    findings and the sample simulation (404 for a funnel drawn by hand)."""
    return _out(await drafting.get_record(session, principal.workspace_id, funnel_id))


ROUTERS = [api_router("/funnels", [draft_with_ai, show_ai_draft], tag="funnels-drafting")]
