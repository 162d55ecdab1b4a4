"""The Funnels engine's public surface: event ingestion (FN-13), hosted forms, the site snippet and
its collect endpoint, tracking pixels and signed redirect links, and signed booking and payment
webhooks.

Every receiver authenticates (ingest token, HMAC signature, or a token signed with the workspace's
secret), stores one inbound event and answers; processing happens off the request path. A request
that fails authentication stores nothing.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Any, TypeVar

import msgspec
from litestar import MediaType, Request, Response, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect

from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.events.forms import FormNotFound, form_html, public_form, submission
from app.engines.funnels.events.site_snippet import SNIPPET
from app.engines.funnels.events.sources.receive import Inbound, booking_event, payment_event
from app.engines.funnels.events.tracking import (
    SIGNATURE_HEADER,
    MessageRef,
    token_workspace,
    verify_body,
    verify_token,
)
from app.errors import Unauthorized, ValidationFailed
from app.platform.models import Workspace
from app.platform.service import webhook_secret, workspace_for_ingest_token
from app.runtime import Runtime
from app.web.auth import CurrentRuntime
from app.web.id_bounds import within_id_bounds
from app.web.input_guard import check_json, check_value
from app.web.receivers import HeaderLookup, Incoming, receiver

PIXEL = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
T = TypeVar("T")


def _deps(runtime: Runtime) -> FunnelsDeps:
    """The engine's dependencies: the event writer and the caches of resolved tokens and
    decrypted secrets (reused for ``CACHE_SECONDS`` of the runtime's clock)."""
    return runtime.resources.require(FunnelsDeps)


# -- authentication ----------------------------------------------------------------------------


async def _token_workspace(runtime: Runtime, token: str) -> int | None:
    key = hashlib.sha256(token.encode()).hexdigest()
    tokens = _deps(runtime).ingest_tokens
    hit = tokens.get(key)
    if hit is not None:
        return hit
    async with runtime.db.read() as session:
        workspace = await workspace_for_ingest_token(session, token)
    if workspace is None:
        return None
    tokens.put(key, workspace.id)
    return workspace.id


async def workspace_secret(runtime: Runtime, workspace_id: int) -> str | None:
    secrets = _deps(runtime).workspace_secrets
    hit = secrets.get(workspace_id)
    if hit is not None:
        return hit
    async with runtime.db.read() as session:
        workspace = await session.get(Workspace, workspace_id)
    if workspace is None:
        return None
    secret = webhook_secret(runtime.secrets, workspace)
    secrets.put(workspace_id, secret)
    return secret


async def _signed_workspace(
    headers: HeaderLookup, runtime: Runtime, workspace_id: int | None, body: bytes
) -> int:
    """The workspace of a request signed with the workspace's signing secret
    (``X-Sweepline-Signature``, or in ``Stripe-Signature`` on the payment endpoint), or
    :class:`Unauthorized`."""
    header = headers.get(SIGNATURE_HEADER) or headers.get("stripe-signature")
    if workspace_id is None:
        raw = headers.get("x-sweepline-workspace") or ""
        workspace_id = int(raw) if raw.isascii() and raw.isdigit() else None
    if not header or workspace_id is None:
        raise Unauthorized("a signature is required (X-Sweepline-Signature)")
    secret = await workspace_secret(runtime, workspace_id)
    now = int(runtime.clock.now().timestamp())
    if secret is None or not verify_body(secret, body, header, now):
        raise Unauthorized("the signature does not match")
    return workspace_id


async def _authenticated(incoming: Incoming) -> int:
    """Ingest token (``X-Ingest-Token``) or HMAC signature (plus ``X-Sweepline-Workspace``)."""
    runtime, headers = incoming.runtime, incoming.headers
    token = headers.get("x-ingest-token")
    if token:
        workspace_id = await _token_workspace(runtime, token)
        if workspace_id is None:
            raise Unauthorized("the ingest token is unknown")
        return workspace_id
    return await _signed_workspace(headers, runtime, None, incoming.body)


def _decode(body: bytes, decoder: msgspec.json.Decoder[T]) -> T:
    check_json(body)
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise ValidationFailed.field("body", str(exc)) from None
    except msgspec.DecodeError:
        raise ValidationFailed.field("body", "not valid JSON") from None


async def store_event(
    runtime: Runtime,
    *,
    workspace_id: int,
    source: str,
    name: str,
    external_id: str | None,
    payload: dict[str, Any],
) -> int | None:
    deps = _deps(runtime)
    # Returns once the event's batch committed: an answered event is durable.
    now = runtime.clock.now()
    stored = await deps.event_writer.store(
        workspace_id=workspace_id,
        source=source,
        name=name,
        external_id=external_id,
        payload=payload,
        now=now,
    )
    if stored is not None:
        await deps.processing.request(now)
    return stored


class Accepted(msgspec.Struct, kw_only=True):
    stored: bool
    """False when the sender's event id was received before (nothing new was stored)."""
    id: int | None = None


# -- api_event and delivery reports ------------------------------------------------------------


EventName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-:]+$")
]
EventId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class ContactRef(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: int | None = None
    email: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    phone: str | None = None


class ApiEventIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    event_id: EventId
    """Your id for this event: sending it again stores nothing new."""
    name: EventName
    contact: ContactRef
    properties: dict[str, Any] = msgspec.field(default_factory=dict)
    occurred_at: datetime | None = None
    create_contact: bool = False
    """Create the contact when no contact has this e-mail address."""


# One decoder per body type, built once: the body is decoded straight into the typed struct.
_API_EVENT = msgspec.json.Decoder(ApiEventIn)


@receiver("/hooks/funnels/events", status_code=202)
async def api_event(incoming: Incoming) -> Accepted:
    """Store a custom event posted by the customer's own code (``api_event`` trigger)."""
    workspace_id = await _authenticated(incoming)
    event = _decode(incoming.body, _API_EVENT)
    if event.contact.id is None and not event.contact.email:
        raise ValidationFailed.field("contact", "give the contact's id or email")
    if event.occurred_at is not None and event.occurred_at.tzinfo is None:
        raise ValidationFailed.field("occurred_at", "needs a time zone offset")
    payload = {
        "contact": msgspec.to_builtins(event.contact),
        "properties": event.properties,
        "occurred_at": event.occurred_at.isoformat() if event.occurred_at else None,
        "create": event.create_contact,
    }
    stored = await store_event(
        incoming.runtime,
        workspace_id=workspace_id,
        source="api",
        name=event.name,
        external_id=event.event_id,
        payload=payload,
    )
    return Accepted(stored=stored is not None, id=stored)


class DeliveryIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    event_id: EventId
    kind: str
    """delivered, opened, clicked, bounced, complained or unsubscribed."""
    message_id: str = ""
    email: str | None = None
    url: str | None = None


_DELIVERY = msgspec.json.Decoder(DeliveryIn)


@receiver("/hooks/funnels/delivery", status_code=202)
async def delivery_report(incoming: Incoming) -> Accepted:
    """A mail provider's report about one message (counters, suppression, FN-11 events)."""
    workspace_id = await _authenticated(incoming)
    report = _decode(incoming.body, _DELIVERY)
    kinds = ("delivered", "opened", "clicked", "bounced", "complained", "unsubscribed")
    if report.kind not in kinds:
        raise ValidationFailed.field("kind", f"one of {', '.join(kinds)}")
    stored = await store_event(
        incoming.runtime,
        workspace_id=workspace_id,
        source="delivery",
        name=report.kind,
        external_id=report.event_id,
        payload=msgspec.to_builtins(report),
    )
    return Accepted(stored=stored is not None, id=stored)


# -- bookings and payments (signed webhooks) ---------------------------------------------------


@post("/hooks/funnels/{workspace_id:int}/payments", status_code=202, guards=[within_id_bounds])
async def payment_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, workspace_id: FromPath[int]
) -> Accepted:
    """Payment events in Stripe's shape (``payment_made``), signed with the workspace's signing
    secret. A Stripe account signs with its endpoint's own secret: configure it as a webhook
    source (``/api/v1/funnels/sources``) and point Stripe at the source's URL."""
    body = await request.body()
    await _signed_workspace(request.headers, runtime, workspace_id, body)
    check_json(body)
    return await _stored(runtime, workspace_id, payment_event(body))


@post("/hooks/funnels/{workspace_id:int}/bookings", status_code=202, guards=[within_id_bounds])
async def booking_webhook(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, workspace_id: FromPath[int]
) -> Accepted:
    """Booking events (``booking.created`` → ``booking_made``), signed with the workspace's
    signing secret; a booking provider's own signature goes to a webhook source."""
    body = await request.body()
    await _signed_workspace(request.headers, runtime, workspace_id, body)
    check_json(body)
    return await _stored(runtime, workspace_id, booking_event(body))


async def _stored(runtime: Runtime, workspace_id: int, event: Inbound | None) -> Accepted:
    """Store a provider's event (``None``: a type nothing listens to, acknowledged)."""
    if event is None:
        return Accepted(stored=False)
    stored = await store_event(
        runtime,
        workspace_id=workspace_id,
        source=event.source,
        name=event.name,
        external_id=event.external_id,
        payload=event.payload,
    )
    return Accepted(stored=stored is not None, id=stored)


# -- hosted forms ------------------------------------------------------------------------------


PAGE_LANGUAGE = "en"
"""The hosted pages' ``<html lang>``: workspaces carry no language of their own, and the pages'
fixed wording (``Send``, ``E-mail``) is English."""
PAGE_STYLESHEET = "/static/public_form.css"
"""The hosted pages' look, served from the dashboard's static files: the pages' policy allows no
inline ``<style>`` (``app.web.security_headers``)."""


def _page(title: str, content: str, status: int = 200) -> Response[str]:
    html = (
        f"<!doctype html><html lang='{PAGE_LANGUAGE}'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width'><title>{title}</title>"
        f"<link rel='stylesheet' href='{PAGE_STYLESHEET}'>"
        f"</head><body><main>{content}</main></body></html>"
    )
    return Response(html, media_type=MediaType.HTML, status_code=status)


@get("/t/f/{public_id:str}")
async def form_page(runtime: CurrentRuntime, public_id: FromPath[str]) -> Response[str]:
    from html import escape

    try:
        async with runtime.db.read() as session:
            form = await public_form(session, public_id)
    except FormNotFound:
        return _page("Not found", "<p>This form does not exist.</p>", 404)
    return _page(
        escape(form.name), f"<h1>{escape(form.name)}</h1>" + form_html(form, f"/t/f/{public_id}")
    )


@post("/t/f/{public_id:str}", status_code=200)
async def form_submit(
    runtime: CurrentRuntime,
    public_id: FromPath[str],
    data: Annotated[dict[str, Any], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Response[str]:
    from html import escape

    try:
        async with runtime.db.read() as session:
            form = await public_form(session, public_id)
    except FormNotFound:
        return _page("Not found", "<p>This form does not exist.</p>", 404)
    try:
        check_value(data, where="form")
        submission_id, values = submission(form, data)
    except ValidationFailed as exc:
        detail = exc.details[0]["message"] if exc.details else exc.message
        again = form_html(form, f"/t/f/{public_id}")
        return _page("Check the form", f"<p role='alert'>{escape(detail)}</p>{again}", 422)
    await store_event(
        runtime,
        workspace_id=form.workspace_id,
        source="form",
        name="form_submit",
        external_id=submission_id,
        payload={"form": form.public_id, "values": values},
    )
    return _page("Thank you", f"<p class='thanks'>{escape(form.success_message)}</p>")


# -- site snippet, pixel, links ----------------------------------------------------------------


@get("/t/s.js", media_type="application/javascript")
async def site_script() -> Response[str]:
    return Response(
        SNIPPET,
        media_type="application/javascript",
        headers={"Cache-Control": "public, max-age=3600"},
    )


class VisitIn(msgspec.Struct, kw_only=True):
    key: str
    visitor: str
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    url: str = ""
    title: str = ""


_VISIT = msgspec.json.Decoder(VisitIn)


@receiver("/t/c", status_code=204)
async def collect(incoming: Incoming) -> None:
    """A page view reported by the site snippet (``page_visit``)."""
    runtime = incoming.runtime
    visit = _decode(incoming.body, _VISIT)
    workspace_id = token_workspace(visit.key)
    secret = None if workspace_id is None else await workspace_secret(runtime, workspace_id)
    site = verify_token(secret, visit.key) if secret else None
    visitor = verify_token(secret, visit.visitor) if secret else None
    if (
        site is None
        or visitor is None
        or site.get("t") != "site"
        or visitor.get("t") != "visitor"
        or visitor.get("w") != workspace_id
        or not isinstance(visitor.get("k"), int)
    ):
        raise Unauthorized("unknown site key or visitor")
    assert workspace_id is not None
    await store_event(
        runtime,
        workspace_id=workspace_id,
        source="site",
        name="page_visit",
        external_id=visit.id,
        payload={"contact_id": visitor["k"], "url": visit.url[:2000], "title": visit.title[:300]},
    )


async def _message_ref(runtime: Runtime, token: str) -> tuple[MessageRef, dict[str, Any]] | None:
    workspace_id = token_workspace(token)
    secret = None if workspace_id is None else await workspace_secret(runtime, workspace_id)
    claims = verify_token(secret, token) if secret else None
    ref = MessageRef.from_claims(claims) if claims else None
    if ref is None or claims is None:
        return None
    return ref, claims


def _bucket(token: str, kind: str, runtime: Runtime, seconds: int) -> str:
    """Repeated loads of one pixel (or clicks of one link) within ``seconds`` are one event."""
    digest = hashlib.sha256(token.encode()).hexdigest()[:24]
    return f"{kind}:{digest}:{int(runtime.clock.now().timestamp()) // seconds}"


@get("/t/o/{token:str}")
async def open_pixel(runtime: CurrentRuntime, token: FromPath[str]) -> Response[bytes]:
    """The tracking pixel: records ``message_opened`` for the message it was sent in."""
    token = token.removesuffix(".gif")
    found = await _message_ref(runtime, token)
    if found is None:
        return Response(b"", status_code=404, media_type=MediaType.TEXT)
    ref, _claims = found
    await store_event(
        runtime,
        workspace_id=ref.workspace_id,
        source="tracking",
        name="message_opened",
        external_id=_bucket(token, "open", runtime, 60),
        payload={"ref": ref.claims()},
    )
    return Response(PIXEL, media_type="image/gif", headers={"Cache-Control": "no-store, max-age=0"})


@get("/t/l/{token:str}")
async def link_redirect(runtime: CurrentRuntime, token: FromPath[str]) -> Response[Any]:
    """A signed redirect link: records ``link_clicked`` and sends the reader on. The target is
    inside the signature, so the link cannot be turned into an open redirect."""
    found = await _message_ref(runtime, token)
    target = found[1].get("u") if found else None
    if (
        found is None
        or not isinstance(target, str)
        or not target.startswith(("http://", "https://"))
    ):
        return Response("unknown link", status_code=404, media_type=MediaType.TEXT)
    ref, _claims = found
    await store_event(
        runtime,
        workspace_id=ref.workspace_id,
        source="tracking",
        name="link_clicked",
        external_id=_bucket(token, "click", runtime, 5),
        payload={"ref": ref.claims(), "url": target},
    )
    return Redirect(target, status_code=302)


ROUTES: list[Any] = [
    api_event,
    delivery_report,
    payment_webhook,
    booking_webhook,
    form_page,
    form_submit,
    site_script,
    collect,
    open_pixel,
    link_redirect,
]
