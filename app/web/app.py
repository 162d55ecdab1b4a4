"""``create_app(settings)``: the Litestar application hosting API, webhooks and dashboard.

When no runtime is given, the app builds one in its lifespan, checks (or, on the embedded default,
applies) the migrations, and starts the workers and sweepers. ``python -m app serve`` builds and
prepares its runtime first (to print the first-run notice or the demo's banner) and hands it in
as the process's server (``serving``).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from litestar import Litestar, Request, Response, Router
from litestar.config.csrf import CSRFConfig
from litestar.di import Provide
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.template import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app import telemetry
from app.clock import Clock
from app.db.migrate import check_current, upgrade
from app.heap import settle_startup_heap
from app.logs import correlate
from app.runtime import Runtime
from app.settings import Settings
from app.settings_web import parse_bind, parse_networks
from app.web import ops
from app.web.access import Auth, authenticated, public, require_caller, verify_routes
from app.web.api import adrules as adrules_api
from app.web.api import audit as audit_api
from app.web.api import funnels as funnels_api
from app.web.api import funnels_campaigns as funnels_campaigns_api
from app.web.api import funnels_drafting as funnels_drafting_api
from app.web.api import funnels_events as funnels_events_api
from app.web.api import funnels_experiments as funnels_experiments_api
from app.web.api import funnels_providers as funnels_providers_api
from app.web.api import funnels_segments as funnels_segments_api
from app.web.api import jobs as jobs_api
from app.web.api import platform as platform_api
from app.web.api import queue_jobs as queue_jobs_api
from app.web.api import ranktracking as ranktracking_api
from app.web.audit_origin import audit_origin
from app.web.auth import LoginRequired, provide_runtime, ui_principal
from app.web.dashboard import (
    account_security,
    audit_ui,
    bulk_jobs_ui,
    contacts_ui,
    funnel_experiments_ui,
    queue_jobs_ui,
    two_factor_signin,
    views,
)
from app.web.dashboard import adrules as adrules_ui
from app.web.dashboard import funnels as funnels_ui
from app.web.dashboard import funnels_campaigns as funnels_campaigns_ui
from app.web.dashboard import funnels_drafting as funnels_drafting_ui
from app.web.dashboard import funnels_import as funnels_import_ui
from app.web.dashboard import organisation as organisation_ui
from app.web.dashboard import ranktracking as ranktracking_ui
from app.web.dashboard import ranktracking_import as ranktracking_import_ui
from app.web.deps import DEPENDENCIES
from app.web.empty_status import no_body_on_empty_statuses
from app.web.errors import EXCEPTION_HANDLERS
from app.web.hooks import adrules as adrules_hooks
from app.web.hooks import funnels as funnels_hooks
from app.web.hooks import funnels_public as funnels_public_hooks
from app.web.hooks import ranktracking as ranktracking_hooks
from app.web.id_bounds import verify_id_bounds
from app.web.metrics_listener import MetricsListener
from app.web.openapi_closed import ClosedStructSchemas
from app.web.openapi_decimal import DecimalSchemas
from app.web.openapi_errors import document_errors
from app.web.openapi_parameters import install as document_parameter_rules
from app.web.options_allow import complete_options_allow
from app.web.rate_limits import rate_limit_headers
from app.web.request_bounds import request_bounds
from app.web.request_spans import request_spans
from app.web.security_headers import security_headers
from app.wiring import assemble

log = logging.getLogger(__name__)

DASHBOARD_DIR = Path(__file__).parent / "dashboard"
ENGINE_UIS = [
    adrules_ui,
    funnels_ui,
    ranktracking_ui,
    funnels_campaigns_ui,
    funnels_import_ui,
    ranktracking_import_ui,
    bulk_jobs_ui,
    contacts_ui,
    funnels_drafting_ui,
    funnel_experiments_ui,
]
ENGINE_APIS = [
    adrules_api,
    funnels_api,
    ranktracking_api,
    funnels_events_api,
    funnels_campaigns_api,
    funnels_providers_api,
    funnels_drafting_api,
    funnels_experiments_api,
    funnels_segments_api,
]
ENGINE_HOOKS = [adrules_hooks, funnels_hooks, ranktracking_hooks, funnels_public_hooks]

# Programs authenticate with keys, tokens or signatures, not cookies: no CSRF token there.
CSRF_EXEMPT = ["^/api/", "^/hooks/", "^/t/"]


def _login_redirect(request: Request[Any, Any, Any], exc: LoginRequired) -> Response[Any]:
    return Redirect(f"/login?next={request.url.path}")


_REQUEST_ID_PREFIX = secrets.token_hex(4)
"""This process's share of every request id: random once per process, so ids from several
processes (and restarts) do not collide, while each request costs a counter step, not a read of
the system's random source."""
_REQUEST_NUMBERS = itertools.count(1)


def next_request_id() -> str:
    """16 hex characters: the process's prefix, then its request number."""
    return f"{_REQUEST_ID_PREFIX}{next(_REQUEST_NUMBERS) & 0xFFFFFFFF:08x}"


def correlation_middleware(clock: Clock) -> Callable[[ASGIApp], ASGIApp]:
    """Give every request an id (``X-Request-ID``), attached to each log line it causes, and log
    one line per request when it is answered, with its duration on ``clock``."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            request_id = next_request_id()
            started = clock.monotonic()
            status = 500

            async def send_with_id(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    header = (b"x-request-id", request_id.encode())
                    message["headers"] = [*message.get("headers", ()), header]
                await send(message)

            with correlate(request_id):
                try:
                    await app(scope, receive, send_with_id)
                except HTTPException as exc:
                    # Raised by a middleware inside this one (CSRF 403, 413): the exception handler
                    # outside answers with its status, which is what the access log must say.
                    status = exc.status_code
                    raise
                finally:
                    ops.log_request(scope, status, clock.monotonic() - started)

        return middleware

    return wrap


async def prepare_database(runtime: Runtime) -> None:
    """Embedded default: migrate automatically. Server mode: refuse an out-of-date schema."""
    if runtime.settings.database.is_sqlite:
        await upgrade(runtime.settings.database.url)
    else:
        await check_current(runtime.db.write_engine)


SWAGGER_UI = "/static/vendor/swagger-ui"


def openapi_config() -> OpenAPIConfig:
    """The API's OpenAPI document at ``/schema/openapi.json`` and its browser UI at ``/schema``
    (also ``/schema/swagger``), drawn from the vendored Swagger UI: it works offline, and nothing
    is loaded from a CDN. Every ``/api/v1`` operation takes a workspace API key as a bearer token."""
    return OpenAPIConfig(
        title="Sweepline",
        version="0.1.0",
        path="/schema",
        description=(
            "The JSON API of Sweepline. Authenticate with a workspace API key: "
            "`Authorization: Bearer swl_…` (read keys may only GET). Errors are "
            '`{"code", "message", "details"}`.'
        ),
        components=Components(
            security_schemes={
                "ApiKey": SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="A workspace API key (swl_…), created in the dashboard, "
                    "with POST /api/v1/api-keys or python -m app create-api-key.",
                )
            }
        ),
        openapi_router=Router(
            path="/schema",
            route_handlers=[],
            include_in_schema=False,
            opt=public("the API's description, so a program can learn how to call it"),
        ),
        render_plugins=[
            SwaggerRenderPlugin(
                js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
                css_url=f"{SWAGGER_UI}/swagger-ui.css",
                standalone_preset_js_url=f"{SWAGGER_UI}/swagger-ui-standalone-preset.js",
                path=["/", "/swagger"],
                favicon=f"<link rel='icon' type='image/png' href='{SWAGGER_UI}/favicon-32x32.png'>",
            )
        ],
    )


def create_app(
    settings: Settings,
    runtime: Runtime | None = None,
    *,
    background: bool = True,
    extra_pages: Sequence[Any] = (),
    serving: bool = False,
) -> Litestar:
    """Build the application. Pass ``runtime`` to share one (tests); ``background`` starts the
    workers and sweepers in this process; ``extra_pages`` are dashboard pages a composition adds
    (the demo's mailbox). ``serving``: the app is its process's server and the runtime handed in
    is its own — it freezes what is alive once started out of later garbage collections
    (:mod:`app.heap`) and closes the runtime when it stops, as an app that builds its runtime
    always does."""

    builds_runtime = runtime is None
    rt = assemble(settings) if runtime is None else runtime
    lifespan = _lifespan(
        rt,
        settings,
        builds_runtime=builds_runtime,
        owned=builds_runtime or serving,
        background=background,
        serving=serving,
    )
    app = Litestar(
        route_handlers=_routers(extra_pages),
        dependencies=DEPENDENCIES,
        lifespan=[lifespan],
        exception_handlers={**EXCEPTION_HANDLERS, LoginRequired: _login_redirect},
        csrf_config=CSRFConfig(
            secret=rt.session_secret,
            cookie_name="swl_csrf",
            header_name="x-csrf-token",
            cookie_secure=settings.web.secure_cookies,
            exclude=CSRF_EXEMPT,
        ),
        template_config=TemplateConfig(
            directory=DASHBOARD_DIR / "templates", engine=JinjaTemplateEngine
        ),
        openapi_config=openapi_config(),
        plugins=[ClosedStructSchemas(), DecimalSchemas()],
        middleware=[
            # Only a process that traces pays for the request spans' middleware.
            *([request_spans()] if telemetry.enabled() else []),
            correlation_middleware(rt.clock),
            audit_origin(parse_networks(settings.web.trusted_proxies)),
            request_bounds(settings.web.max_body_bytes),
        ],
        before_send=[
            security_headers(hsts=settings.web.secure_cookies),
            rate_limit_headers(),
            no_body_on_empty_statuses,
        ],
        request_max_body_size=settings.web.max_body_bytes,
        debug=False,
        logging_config=None,
    )
    verify_routes(app)
    verify_id_bounds(app)
    complete_options_allow(app)
    document_errors(app)
    document_parameter_rules(app)
    app.state.nav = [link for ui in ENGINE_UIS for link in ui.NAV]
    app.state.runtime = rt
    return app


def _lifespan(
    rt: Runtime,
    settings: Settings,
    *,
    builds_runtime: bool,
    owned: bool,
    background: bool,
    serving: bool,
) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
    """What the application does when it starts and stops. ``owned``: a process of its own (not a
    test's app around a shared runtime), which records the platform's start and closes the
    runtime at the end."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        if builds_runtime:  # `serve` prepared the one it hands in
            await prepare_database(rt)
        if owned:
            await rt.record_platform_stop()
        if background:
            rt.start_database_upkeep()
            rt.start_workers()
            if settings.sweepers.enabled:
                rt.start_sweepers()
        if owned:
            # A serving process, not an app a test builds around its own runtime: a test
            # session would keep every frozen app alive.
            settle_startup_heap(settings.process.heap_freeze)
        metrics_bind = parse_bind("METRICS_BIND", settings.web.metrics_bind) if serving else None
        listener = MetricsListener(rt, *metrics_bind) if metrics_bind else None
        try:
            if listener is not None:
                await listener.start()
            yield
        finally:
            if listener is not None:
                await listener.stop()
            if owned:
                await rt.aclose()
            elif background:
                await rt.stop()

    return lifespan


def _routers(extra_pages: Sequence[Any]) -> list[Any]:
    """The application's routers, each with what protects it.

    The guard sits on every router but the receivers' (the API routers carry it from
    api_router). The receivers (all public) go without it: it would only wave them through, and
    Litestar copies the route handler for each guard call, a measurable part of an ingestion
    request. verify_routes holds the line. The routers are the application's own, not grouped
    under one guarded router: Litestar deep-copies a router it registers, and a group would
    have every route copied twice (about a fifth of what building an application costs)."""
    dashboard = Router(
        path="/",
        route_handlers=[
            *views.ROUTES,
            *organisation_ui.ROUTES,
            *audit_ui.ROUTES,
            *account_security.ROUTES,
            *queue_jobs_ui.ROUTES,
            *(r for ui in ENGINE_UIS for r in ui.ROUTES),
            *extra_pages,
        ],
        dependencies={"principal": Provide(ui_principal), "runtime": Provide(provide_runtime)},
        include_in_schema=False,
        opt=authenticated(Auth.SESSION),
        guards=[require_caller],
    )
    # Everything below answers without credentials; each router says what protects it instead.
    probes = Router(
        path="/",
        route_handlers=ops.ROUTES,
        opt=public(
            "probes for the orchestrator, no workspace data; /metrics checks METRICS_TOKEN itself"
        ),
        guards=[require_caller],
    )
    visitor_pages = Router(
        path="/",
        route_handlers=[
            *views.PUBLIC_ROUTES,
            *organisation_ui.PUBLIC_ROUTES,
            *two_factor_signin.PUBLIC_ROUTES,
            *(r for ui in ENGINE_UIS for r in ui.PUBLIC_ROUTES),
        ],
        dependencies={"runtime": Provide(provide_runtime)},
        include_in_schema=False,
        opt=public(
            "sign-in, first-run setup and invitation pages: the visitor has no session yet; "
            "a shared report's page, whose random token (stored hashed, expiring, revocable) "
            "is its key"
        ),
        guards=[require_caller],
    )
    hooks = Router(
        path="/",
        route_handlers=[r for engine_hooks in ENGINE_HOOKS for r in engine_hooks.ROUTES],
        dependencies={"runtime": Provide(provide_runtime)},
        include_in_schema=False,
        opt=public(
            "webhooks, postbacks, forms, tracking pixels and unsubscribe links: each request "
            "carries its own signature, token or signed link"
        ),
    )
    static = create_static_files_router(
        path="/static",
        directories=[DASHBOARD_DIR / "static"],
        opt=public("the dashboard's stylesheets, scripts and images"),
        guards=[require_caller],
    )
    return [
        probes,
        *platform_api.ROUTERS,
        *audit_api.ROUTERS,
        *jobs_api.ROUTERS,
        *queue_jobs_api.ROUTERS,
        *(r for api in ENGINE_APIS for r in api.ROUTERS),
        dashboard,
        visitor_pages,
        static,
        hooks,
    ]
