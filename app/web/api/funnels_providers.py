"""Funnels API: the workspace's providers for the outside actions, and the organisation's AI
quota and usage. Credentials go in and never come out: a provider answers ``has_secret`` only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import delete, get, put
from litestar.params import FromPath, JSONBody

from app.engines.funnels import reads
from app.engines.funnels.outside import ai_ledger
from app.engines.funnels.outside import config as providers
from app.engines.funnels.outside.models import ProviderConfig
from app.pagination import Page, page_of
from app.schemas import Key, Schema
from app.web.api import funnels_sources
from app.web.api.common import api_router
from app.web.auth import (
    CurrentPrincipal,
    require_admin,
    require_organisation_manager,
)
from app.web.deps import CurrentClock, Guard, Paging, Reads, Secrets, Writes


class ProviderIn(Schema):
    shape: Annotated[str, msgspec.Meta(min_length=1, max_length=16)]
    """``json`` or ``twilio`` (sms), ``json`` (push, letter, booking), ``stripe`` (payments),
    ``openai`` (ai), ``guarded`` (http)."""
    base_url: Annotated[str, msgspec.Meta(max_length=500)] = ""
    options: Annotated[dict[Key, Any], msgspec.Meta(max_length=100)] = msgspec.field(
        default_factory=dict
    )
    secret: Annotated[str, msgspec.Meta(max_length=4000)] | None = None
    """The API key (Twilio: the auth token); omitted keeps the stored one."""


class ProviderOut(Schema):
    kind: str
    shape: str
    base_url: str
    options: dict[str, Any]
    has_secret: bool
    updated_at: datetime


class QuotaIn(Schema):
    quota_tokens: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] | None
    """Tokens per calendar month for the whole organisation; ``null`` for no limit."""


class QuotaOut(Schema):
    quota_tokens: int | None
    used_tokens: int
    remaining_tokens: int | None
    period_start: datetime


class UsageOut(Schema):
    id: int
    outcome: str
    tokens: int
    model: str
    detail: str
    at: datetime


def _out(row: ProviderConfig, has_secret: bool) -> ProviderOut:
    return ProviderOut(
        kind=row.kind,
        shape=row.shape,
        base_url=row.base_url,
        options=dict(row.options or {}),
        has_secret=has_secret,
        updated_at=row.updated_at,
    )


def _quota(view: ai_ledger.QuotaView) -> QuotaOut:
    return QuotaOut(
        quota_tokens=view.quota_tokens,
        used_tokens=view.used_tokens,
        remaining_tokens=view.remaining_tokens,
        period_start=view.period_start,
    )


@get("/providers")
async def list_providers(principal: CurrentPrincipal, session: Reads) -> list[ProviderOut]:
    rows = await providers.list_configs(session, principal.workspace_id)
    return [_out(row, has) for row, has in rows]


@put("/providers/{kind:str}")
async def configure_provider(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    guard: Guard,
    kind: FromPath[str],
    data: JSONBody[ProviderIn],
) -> ProviderOut:
    """Create or replace the provider of one kind of action (admins only)."""
    require_admin(principal)
    row = await providers.configure(
        uow.session,
        secrets,
        guard,
        workspace_id=principal.workspace_id,
        kind=kind,
        shape=data.shape,
        base_url=data.base_url,
        options=data.options,
        secret=data.secret,
        now=clock.now(),
    )
    has = kind in providers.NEEDS_SECRET or data.secret is not None
    return _out(row, has)


@delete("/providers/{kind:str}")
async def remove_provider(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, kind: FromPath[str]
) -> None:
    """Remove a provider and its stored credential (admins only)."""
    require_admin(principal)
    await providers.remove(
        uow.session, workspace_id=principal.workspace_id, kind=kind, now=clock.now()
    )


@get("/ai/quota")
async def read_quota(principal: CurrentPrincipal, session: Reads, clock: CurrentClock) -> QuotaOut:
    """The organisation's AI quota this month (shared by all its workspaces)."""
    view = await ai_ledger.quota_of(session, principal.organisation_id, clock.now())
    return _quota(view)


@put("/ai/quota")
async def set_quota(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, data: JSONBody[QuotaIn]
) -> QuotaOut:
    require_organisation_manager(principal)
    view = await ai_ledger.set_quota(
        uow.session, principal.organisation_id, data.quota_tokens, clock.now()
    )
    return _quota(view)


@get("/ai/usage")
async def list_usage(
    principal: CurrentPrincipal,
    session: Reads,
    paging: Paging,
) -> Page[UsageOut]:
    """This workspace's generations and refusals, newest first."""
    rows = await reads.ai_usage(
        session, principal.workspace_id, before=paging.after, limit=paging.fetch
    )
    items = [
        UsageOut(
            id=r.id, outcome=r.outcome, tokens=r.tokens, model=r.model, detail=r.detail, at=r.at
        )
        for r in rows
    ]
    return page_of(items, paging.limit)


ROUTERS = [
    api_router(
        "/funnels",
        [list_providers, configure_provider, remove_provider, read_quota, set_quota, list_usage],
        tag="funnels-providers",
    ),
    funnels_sources.ROUTER,
]
