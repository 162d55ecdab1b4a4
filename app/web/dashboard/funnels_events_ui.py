"""Dashboard pages of ingestion: the event stream (refreshed in place), hosted forms with their
embed code, and the site snippet."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.funnels import reads
from app.engines.funnels.events.forms import FormField, create_form, embed_code, list_forms
from app.engines.funnels.events.site_snippet import snippet_tag
from app.engines.funnels.events.tracking import site_key
from app.errors import DomainError
from app.platform.crypto import SecretBox
from app.platform.service import Principal, get_workspace, webhook_secret
from app.settings import Settings
from app.web.auth import CurrentPrincipal, require_admin
from app.web.dashboard.common import error_message, page
from app.web.deps import CurrentClock, CurrentSettings, Reads, Secrets, Writes

Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]

EVENTS = "/ui/funnels/events"
FORMS = "/ui/funnels/forms"
# The forms' labels, so an error names the field a person sees.
FORM_LABELS = {
    "name": "Name",
    "fields": "Fields",
    "add_tag": "Tag submitters",
    "add_list": "Add to list",
}


@get(EVENTS)
async def events_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    return page(
        request,
        "funnels_campaigns/events.html",
        principal,
        **await _events(session, principal.workspace_id),
    )


@get(f"{EVENTS}/stream")
async def events_stream(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    """The table part, refreshed by htmx every few seconds."""
    return page(
        request,
        "funnels_campaigns/_events.html",
        principal,
        **await _events(session, principal.workspace_id),
    )


async def _events(session: ReadSession, workspace_id: int) -> dict[str, Any]:
    return {
        "events": await reads.contact_events_with_email(session, workspace_id, limit=100),
        "inbound": await reads.inbound_events(session, workspace_id, before=None, limit=50),
    }


@get(FORMS)
async def forms_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    secrets: Secrets,
) -> Template:
    return await _forms(request, principal, session, settings, secrets)


async def _forms(
    request: Request[Any, Any, Any],
    principal: Principal,
    session: ReadSession,
    settings: Settings,
    secrets: SecretBox,
    **extra: Any,
) -> Template:
    base = settings.web.public_url
    forms = await list_forms(session, principal.workspace_id)
    workspace = await get_workspace(session, principal.workspace_id)
    key = site_key(webhook_secret(secrets, workspace), workspace.id)
    tpl = page(
        request,
        "funnels_campaigns/forms.html",
        principal,
        forms=[(f, embed_code(f, base), f"{base.rstrip('/')}/t/f/{f.public_id}") for f in forms],
        script_tag=snippet_tag(base, key),
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


@post(FORMS)
async def create_form_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    settings: CurrentSettings,
    secrets: Secrets,
    clock: CurrentClock,
    data: Form,
) -> Template | Redirect:
    require_admin(principal)
    keys = [k.strip() for k in data.get("fields", "").split(",") if k.strip()]
    try:
        async with uow.attempt():
            await create_form(
                uow.session,
                principal.workspace_id,
                name=data.get("name", ""),
                fields=[FormField(k, k.replace("_", " ").capitalize()) for k in keys],
                add_tag=data.get("add_tag", "").strip() or None,
                add_list=data.get("add_list", "").strip() or None,
                now=clock.now(),
            )
    except DomainError as exc:
        return await _forms(
            request,
            principal,
            uow.session,
            settings,
            secrets,
            error=error_message(exc, FORM_LABELS),
            form=data,
        )
    return Redirect(FORMS)


ROUTES: list[Any] = [events_page, events_stream, forms_page, create_form_page]
