"""The "Webhook sources" settings page (``/ui/workspace/webhook-sources``): each payment or
booking provider endpoint of the workspace with its URL and signature scheme, added, given a new
secret or removed with forms. A generated secret is shown once, on the page the form answers;
never again. The same services as ``/api/v1/funnels/sources``; admins only may change them."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from litestar import Request, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.funnels.events.sources import service as sources
from app.engines.funnels.events.sources.models import WebhookSource
from app.engines.funnels.events.sources.signatures import HEADERS
from app.errors import DomainError
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal, require_admin
from app.web.dashboard.common import error_message, page
from app.web.deps import CurrentClock, Reads, Secrets, Writes

PAGE = "/ui/workspace/webhook-sources"
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]

KINDS: dict[str, tuple[str, str, str]] = {
    "stripe": (
        "stripe",
        "payment",
        "Stripe — payments (Stripe-Signature, the endpoint's whsec_ secret)",
    ),
    "calcom": ("calcom", "booking", "Cal.com — bookings (X-Cal-Signature-256)"),
    "sweepline-payment": (
        "sweepline",
        "payment",
        "Your own system — payments, signed with a secret we generate",
    ),
    "sweepline-booking": (
        "sweepline",
        "booking",
        "Your own system — bookings, signed with a secret we generate",
    ),
}
"""Form choice → (provider, receives, label)."""
PROVIDER_LABELS = {"stripe": "Stripe", "calcom": "Cal.com", "sweepline": "Our signature"}
LABELS = {
    "name": "Name",
    "provider": "Provider",
    "receives": "Provider",
    "secret": "Signing secret",
}


def _row(request: Request[Any, Any, Any], source: WebhookSource) -> dict[str, Any]:
    base = request.app.state.runtime.settings.web.public_url.rstrip("/") or str(
        request.base_url
    ).rstrip("/")
    return {
        "id": source.id,
        "name": source.name,
        "provider": PROVIDER_LABELS.get(source.provider, source.provider),
        "needs_secret": source.provider in sources.PASTED,
        "generated_only": source.provider in sources.GENERATED,
        "receives": source.receives,
        "url": f"{base}/hooks/funnels/sources/{source.public_id}",
        "header": HEADERS[source.provider],
        "created_at": source.created_at,
        "rotated_at": source.secret_rotated_at,
    }


async def _page(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    *,
    status: int = 200,
    **extra: Any,
) -> Template:
    rows = await sources.list_sources(session, principal.workspace_id)
    tpl = page(
        request,
        "platform/webhook_sources.html",
        principal,
        sources=[_row(request, r) for r in rows],
        kinds=KINDS,
        **extra,
    )
    tpl.status_code = status
    return tpl


@get(PAGE)
async def sources_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    return await _page(request, principal, session, notice=request.query_params.get("notice"))


@post(PAGE)
async def add_source_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    clock: CurrentClock,
    data: Form,
) -> Template:
    """Add a source; the answer shows its URL and, when it was generated, its secret (once).
    A refused form comes back with what was typed (the secret excepted)."""
    require_admin(principal)
    kind = data.get("kind", "")
    provider, receives, _ = KINDS.get(kind, (kind, None, ""))
    try:
        async with uow.attempt():
            created = await sources.create_source(
                uow.session,
                secrets,
                workspace_id=principal.workspace_id,
                name=data.get("name", ""),
                provider=provider,
                receives=receives,
                secret=data.get("secret") or None,
                now=clock.now(),
            )
            name = created.source.name
    except DomainError as exc:
        return await _page(
            request,
            principal,
            uow.session,
            status=exc.status,
            error=error_message(exc, LABELS),
            form={"name": data.get("name", ""), "kind": kind},
        )
    return await _page(
        request,
        principal,
        uow.session,
        notice=f"Source {name} added: give the provider its URL below.",
        new_secret=created.secret,
        new_secret_for=name,
    )


@post(f"{PAGE}/{{source_id:int}}/rotate")
async def rotate_source_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    clock: CurrentClock,
    source_id: FromPath[int],
    data: Form,
) -> Template:
    """Replace a source's secret: the old one stops working at once."""
    require_admin(principal)
    try:
        async with uow.attempt():
            created = await sources.rotate_secret(
                uow.session,
                secrets,
                workspace_id=principal.workspace_id,
                source_id=source_id,
                secret=data.get("secret") or None,
                now=clock.now(),
            )
            name = created.source.name
    except DomainError as exc:
        return await _page(
            request,
            principal,
            uow.session,
            status=exc.status,
            error=error_message(exc, LABELS),
            error_source=source_id,
        )
    return await _page(
        request,
        principal,
        uow.session,
        notice=f"Source {name}: new secret in use.",
        new_secret=created.secret,
        new_secret_for=name,
    )


@post(f"{PAGE}/{{source_id:int}}/delete")
async def delete_source_page(
    principal: CurrentPrincipal, uow: Writes, source_id: FromPath[int]
) -> Redirect:
    require_admin(principal)
    await sources.delete_source(uow.session, principal.workspace_id, source_id)
    return Redirect(f"{PAGE}?notice={quote('Source removed: its URL answers 404 from now on')}")


ROUTES: list[Any] = [sources_page, add_source_page, rotate_source_page, delete_source_page]
