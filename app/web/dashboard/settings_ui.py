"""Workspace settings pages beside ``/ui/workspace``: the workspace's secrets (names only; a value
goes in and never comes out) and the outside providers the funnels' actions use, one form per kind
(shape, base URL, the kind's typed options, its credential).

Both call the services the API calls (``PUT /api/v1/secrets/{name}``,
``PUT /api/v1/funnels/providers/{kind}``); only workspace admins may change them.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints
from urllib.parse import quote

from litestar import Request, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from app.db.session import ReadSession
from app.engines.adrules.models import META_TOKEN_SECRET
from app.engines.adrules.work.sheets_values import SHEETS_API_KEY_SECRET, SHEETS_TOKEN_SECRET
from app.engines.funnels.outside import config as providers
from app.errors import DomainError, NotFound
from app.platform import service
from app.platform.service import Principal
from app.web.auth import CurrentPrincipal, require_admin
from app.web.dashboard import sources_ui
from app.web.dashboard.common import error_message, page
from app.web.deps import CurrentClock, Guard, Reads, Secrets, Writes

SECRETS = "/ui/workspace/secrets"
PROVIDERS = "/ui/workspace/providers"
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]

KNOWN_SECRETS: dict[str, str] = {
    META_TOKEN_SECRET: "Meta (Facebook) access token for the ad rules (also on the ad accounts page)",
    SHEETS_API_KEY_SECRET: "Google API key, for sheets shared with anyone who has the link",
    SHEETS_TOKEN_SECRET: "Google OAuth access token, for private sheets",
}
KIND_LABELS: dict[str, str] = {
    "sms": "Text messages (SMS)",
    "push": "Push notifications",
    "letter": "Printed letters",
    "payments": "Payments",
    "booking": "Bookings",
    "ai": "AI text",
    "http": "HTTP requests",
}
OPTION_LABELS = {
    "sender": "Sender (number or id)",
    "account_sid": "Account SID (Twilio)",
    "messaging_service_sid": "Messaging service SID (Twilio)",
    "status_callback": "Delivery status callback URL",
    "token_field": "Contact field holding the device token",
    "color": "Print in colour",
    "success_url": "Success URL (a hosted checkout page)",
    "cancel_url": "Cancel URL",
    "window_days": "Look for a free slot within (days)",
    "model": "Model",
    "max_tokens": "Most tokens per answer",
    "system": "System prompt",
    "temperature": "Temperature (0 to 2)",
    "timeout_seconds": "Timeout (seconds)",
    "max_response_bytes": "Largest response (bytes)",
}
PROVIDER_LABELS = {
    "shape": "Provider",
    "base_url": "Base URL",
    "secret": "Credential",
    "options": "Options",
}


# -- secrets -----------------------------------------------------------------------------------


async def _secrets(
    request: Request[Any, Any, Any], principal: Principal, session: ReadSession, **extra: Any
) -> Template:
    names = await service.secret_names(session, principal.workspace_id)
    provider_names = {providers.secret_name(k): k for k in providers.KINDS}
    tpl = page(
        request,
        "platform/secrets.html",
        principal,
        names=names,
        known=KNOWN_SECRETS,
        provider_names=provider_names,
        kind_labels=KIND_LABELS,
        **extra,
    )
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


@get(SECRETS)
async def secrets_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    return await _secrets(request, principal, session, notice=request.query_params.get("notice"))


@post(SECRETS)
async def set_secret_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    clock: CurrentClock,
    data: Form,
) -> Template | Redirect:
    """Store a secret encrypted; the form never shows the value again."""
    require_admin(principal)
    name = (data.get("name") or "").strip()
    value = data.get("value") or ""
    if not value.strip():
        return await _secrets(
            request, principal, uow.session, error="Value: must not be empty", form_name=name
        )
    try:
        async with uow.attempt():
            await service.set_secret(
                uow.session,
                secrets,
                workspace_id=principal.workspace_id,
                name=name,
                value=value,
                now=clock.now(),
            )
    except DomainError as exc:
        return await _secrets(
            request,
            principal,
            uow.session,
            error=error_message(exc, {"name": "Name", "value": "Value"}),
            form_name=name,
        )
    return Redirect(f"{SECRETS}?notice={quote(f'Secret {name} stored')}")


@post(f"{SECRETS}/{{name:str}}/delete")
async def delete_secret_page(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, name: FromPath[str]
) -> Redirect:
    require_admin(principal)
    await service.delete_secret(
        uow.session, workspace_id=principal.workspace_id, name=name, now=clock.now()
    )
    return Redirect(f"{SECRETS}?notice={quote(f'Secret {name} deleted')}")


# -- providers ---------------------------------------------------------------------------------


def _input_of(annotation: Any) -> tuple[str, bool]:
    """The HTML input type for an option's annotation, and whether it may be left blank."""
    optional = False
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(args) < len(get_args(annotation))
        annotation = args[0]
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
    if annotation is bool:
        return "checkbox", optional
    if annotation is int:
        return "int", optional
    if annotation is float:
        return "float", optional
    return "text", optional


def option_fields(kind: str) -> list[dict[str, Any]]:
    """The kind's options as form fields: name, label, input type, default."""
    options_type = providers.OPTIONS.get(kind)
    if options_type is None:
        return []
    hints = get_type_hints(options_type, include_extras=True)
    defaults = options_type()
    out = []
    for name in options_type.__struct_fields__:
        kind_of_input, optional = _input_of(hints[name])
        default = getattr(defaults, name)
        out.append(
            {
                "name": name,
                "label": OPTION_LABELS.get(name, name.replace("_", " ").capitalize()),
                "input": kind_of_input,
                "optional": optional,
                "default": default,
            }
        )
    return out


def options_from_form(kind: str, data: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    """The posted options, typed; a blank leaves the option at its default."""
    out: dict[str, Any] = {}
    for f in option_fields(kind):
        raw = data.get(f"option_{f['name']}")
        if f["input"] == "checkbox":
            out[f["name"]] = raw is not None
            continue
        if raw is None or not raw.strip():
            continue
        raw = raw.strip()
        if f["input"] == "int":
            try:
                out[f["name"]] = int(raw)
            except ValueError:
                return out, f"{f['label']}: a whole number"
        elif f["input"] == "float":
            try:
                out[f["name"]] = float(raw)
            except ValueError:
                return out, f"{f['label']}: a number"
        else:
            out[f["name"]] = raw
    return out, None


async def _providers(
    request: Request[Any, Any, Any], principal: Principal, session: ReadSession, **extra: Any
) -> Template:
    rows = await providers.list_configs(session, principal.workspace_id)
    configured = {row.kind: (row, has) for row, has in rows}
    kinds = [
        {
            "kind": kind,
            "label": KIND_LABELS.get(kind, kind),
            "shapes": providers.SHAPES[kind],
            "needs_secret": kind in providers.NEEDS_SECRET,
            "row": configured.get(kind, (None, False))[0],
            "has_secret": configured.get(kind, (None, False))[1],
            "fields": option_fields(kind),
        }
        for kind in providers.KINDS
    ]
    tpl = page(request, "platform/providers.html", principal, kinds=kinds, **extra)
    if extra.get("error"):
        tpl.status_code = 422
    return tpl


@get(PROVIDERS)
async def providers_page(
    request: Request[Any, Any, Any], principal: CurrentPrincipal, session: Reads
) -> Template:
    return await _providers(request, principal, session, notice=request.query_params.get("notice"))


@post(f"{PROVIDERS}/{{kind:str}}")
async def configure_provider_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    uow: Writes,
    secrets: Secrets,
    guard: Guard,
    clock: CurrentClock,
    kind: FromPath[str],
    data: Form,
) -> Template | Redirect:
    """Create or replace the provider of one kind; a blank credential keeps the stored one.
    A refused form is shown again with what was typed (the credential excepted)."""
    require_admin(principal)
    if kind not in providers.KINDS:
        raise NotFound(f"no provider kind '{kind}'")
    options, message = options_from_form(kind, data)
    if message is None:
        secret = data.get("secret") or None
        try:
            async with uow.attempt():
                await providers.configure(
                    uow.session,
                    secrets,
                    guard,
                    workspace_id=principal.workspace_id,
                    kind=kind,
                    shape=data.get("shape", ""),
                    base_url=(data.get("base_url") or "").strip(),
                    options=options,
                    secret=secret,
                    now=clock.now(),
                )
        except DomainError as exc:
            labels = {**PROVIDER_LABELS}
            labels.update({f"options.{f['name']}": f["label"] for f in option_fields(kind)})
            message = error_message(exc, labels)
    if message is not None:
        return await _providers(
            request, principal, uow.session, error=message, error_kind=kind, form=data
        )
    label = KIND_LABELS.get(kind, kind)
    return Redirect(f"{PROVIDERS}?notice={quote(f'{label}: provider saved')}#provider-{kind}")


@post(f"{PROVIDERS}/{{kind:str}}/remove")
async def remove_provider_page(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, kind: FromPath[str]
) -> Redirect:
    require_admin(principal)
    await providers.remove(
        uow.session, workspace_id=principal.workspace_id, kind=kind, now=clock.now()
    )
    label = KIND_LABELS.get(kind, kind)
    return Redirect(f"{PROVIDERS}?notice={quote(f'{label}: provider removed')}")


ROUTES: list[Any] = [
    secrets_page,
    set_secret_page,
    delete_secret_page,
    providers_page,
    configure_provider_page,
    remove_provider_page,
    *sources_ui.ROUTES,
]
