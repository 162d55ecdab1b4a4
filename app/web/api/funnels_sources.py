"""Funnels API: webhook sources — each payment or booking provider endpoint with its own URL and
signature scheme. Secrets go in (or are generated and shown once) and never come out."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from litestar import delete, get, post
from litestar.params import JSONBody

from app.engines.funnels.events.sources import service as sources
from app.engines.funnels.events.sources.models import WebhookSource
from app.engines.funnels.events.sources.signatures import HEADERS
from app.runtime import Runtime
from app.schemas import Schema
from app.web.api.common import RowId, api_router
from app.web.auth import CurrentPrincipal, CurrentRuntime, require_admin
from app.web.deps import CurrentClock, Reads, Secrets, Writes

Secret = Annotated[str, msgspec.Meta(min_length=1, max_length=500)]


class SourceIn(Schema):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    provider: Literal["stripe", "calcom", "sweepline"]
    """``stripe`` (payments, ``Stripe-Signature``), ``calcom`` (bookings,
    ``X-Cal-Signature-256``) or ``sweepline`` (either, ``X-Sweepline-Signature`` with a
    secret of the source's own)."""
    receives: Literal["payment", "booking"] | None = None
    """What its events feed; the provider's only kind when omitted."""
    secret: Secret | None = None
    """Stripe: the endpoint's ``whsec_…`` signing secret (required). Cal.com: the webhook's
    secret, or omitted to have one generated. Ours: always generated."""


class RotateIn(Schema):
    secret: Secret | None = None
    """The provider's new secret (Stripe: required); omitted to have one generated."""


class SourceOut(Schema):
    id: int
    name: str
    provider: str
    receives: str
    url: str
    """Where the provider posts (give it this URL)."""
    signature_header: str
    created_at: datetime
    secret_rotated_at: datetime


class SourceWithSecret(SourceOut):
    secret: str | None
    """The generated secret, shown this once (``null`` when you gave it)."""


def _url(runtime: Runtime, source: WebhookSource) -> str:
    path = f"/hooks/funnels/sources/{source.public_id}"
    return f"{runtime.settings.web.public_url.rstrip('/')}{path}"


def _out(runtime: Runtime, source: WebhookSource) -> SourceOut:
    return SourceOut(
        id=source.id,
        name=source.name,
        provider=source.provider,
        receives=source.receives,
        url=_url(runtime, source),
        signature_header=HEADERS[source.provider],
        created_at=source.created_at,
        secret_rotated_at=source.secret_rotated_at,
    )


def _with_secret(runtime: Runtime, created: sources.Created) -> SourceWithSecret:
    shown = msgspec.structs.asdict(_out(runtime, created.source))
    return SourceWithSecret(**shown, secret=created.secret)


@get("/sources")
async def list_sources(
    principal: CurrentPrincipal, runtime: CurrentRuntime, session: Reads
) -> list[SourceOut]:
    rows = await sources.list_sources(session, principal.workspace_id)
    return [_out(runtime, row) for row in rows]


@post("/sources", status_code=201)
async def create_source(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    data: JSONBody[SourceIn],
) -> SourceWithSecret:
    """Add a source (admins only); a generated secret is in this answer and nowhere else."""
    require_admin(principal)
    created = await sources.create_source(
        uow.session,
        secrets,
        workspace_id=principal.workspace_id,
        name=data.name,
        provider=data.provider,
        receives=data.receives,
        secret=data.secret,
        now=clock.now(),
    )
    return _with_secret(runtime, created)


@post("/sources/{source_id:int}/rotate", status_code=200)
async def rotate_source_secret(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    source_id: RowId,
    data: JSONBody[RotateIn],
) -> SourceWithSecret:
    """Replace the source's secret: requests signed with the old one are refused from now on."""
    require_admin(principal)
    created = await sources.rotate_secret(
        uow.session,
        secrets,
        workspace_id=principal.workspace_id,
        source_id=source_id,
        secret=data.secret,
        now=clock.now(),
    )
    return _with_secret(runtime, created)


@delete("/sources/{source_id:int}")
async def delete_source(principal: CurrentPrincipal, uow: Writes, source_id: RowId) -> None:
    """Remove a source: its URL answers 404 from now on."""
    require_admin(principal)
    await sources.delete_source(uow.session, principal.workspace_id, source_id)


ROUTER = api_router(
    "/funnels",
    [list_sources, create_source, rotate_source_secret, delete_source],
    tag="funnels-sources",
)
