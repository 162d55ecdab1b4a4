"""Authentication by default (issue 13, item 6): every registered route refuses an anonymous
caller unless it is on the declared public list below, and an application with a route that
declares no access rule is refused when it is built."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from litestar import Litestar, get
from litestar.exceptions import ImproperlyConfiguredException

from app.runtime import Runtime
from app.settings import Settings
from app.web.access import Auth, authenticated, public, public_routes, require_caller, verify_routes
from app.web.access import route_handlers as app_route_handlers
from app.web.app import create_app
from tests.harness.app_client import asgi_transport

# What answers without credentials, and nothing else. Adding a public route means adding it
# here, where a reviewer sees it.
EXPECTED_PUBLIC = {
    # Probes (README, Operations).
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/metrics"),
    # The OpenAPI document and its UI.
    ("GET", "/schema"),
    ("GET", "/schema/swagger"),
    ("GET", "/schema/openapi.json"),
    ("GET", "/schema/oauth2-redirect.html"),
    ("GET", "/schema/{path:str}"),
    # Sign-in, first-run setup, invitation acceptance.
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    # The second step of sign-in, reached with the signed challenge cookie a right password set.
    ("GET", "/login/two-factor"),
    ("POST", "/login/two-factor"),
    ("GET", "/login/two-factor/enrol"),
    ("POST", "/login/two-factor/enrol"),
    ("GET", "/favicon.ico"),
    ("GET", "/setup"),
    ("POST", "/setup"),
    ("GET", "/invite/{token:str}"),
    ("POST", "/invite/{token:str}"),
    # A shared position report: its random token (stored hashed, expiring, revocable) is its key.
    ("GET", "/shared/ranktracking/{token:str}"),
    # Webhooks and postbacks, each with its own signature or token.
    ("POST", "/hooks/funnels/events"),
    ("POST", "/hooks/funnels/delivery"),
    ("POST", "/hooks/funnels/{workspace_id:int}/payments"),
    ("POST", "/hooks/funnels/{workspace_id:int}/bookings"),
    ("POST", "/hooks/funnels/sources/{public_id:str}"),
    ("POST", "/hooks/funnels/{workspace_id:int}/ses"),
    ("POST", "/hooks/funnels/{workspace_id:int}/mailgun"),
    ("POST", "/hooks/funnels/{workspace_id:int}/sendgrid"),  # ECDSA-signed
    ("POST", "/hooks/funnels/{workspace_id:int}/postmark"),  # the credentials set on it
    ("POST", "/hooks/ranktracking/postback/{token:str}"),
    # A run digest's approval link, signed with the workspace's secret and expiring (AR-28).
    ("GET", "/hooks/adrules/approve/{token:str}"),
    ("POST", "/hooks/adrules/approve/{token:str}"),
    ("POST", "/hooks/adrules/approve/{token:str}/reject"),
    # Forms, the site snippet, tracking pixels, signed links, unsubscribe.
    ("GET", "/t/f/{public_id:str}"),
    ("POST", "/t/f/{public_id:str}"),
    ("GET", "/t/s.js"),
    ("POST", "/t/c"),
    ("GET", "/t/o/{token:str}"),
    ("GET", "/t/l/{token:str}"),
    ("GET", "/t/u/{token:str}"),
    ("POST", "/t/u/{token:str}"),
    ("GET", "/t/u/{token:str}/preferences"),
    ("POST", "/t/u/{token:str}/preferences"),
    ("POST", "/t/unsubscribe-mail"),
    # Static assets.
    ("GET", "/static/{file_path:path}"),
    ("HEAD", "/static/{file_path:path}"),
}

_PARAM = re.compile(r"\{([^}:]+):([^}]+)\}")
_SAMPLE = {"int": "1", "str": "sample", "path": "sample.css"}


def concrete(path: str) -> str:
    """The route's path with each parameter filled in with a value of its type."""
    return _PARAM.sub(lambda m: _SAMPLE[m.group(2)], path)


@pytest.fixture
async def app(settings: Settings, runtime: Runtime) -> Litestar:
    return create_app(settings, runtime, background=False)


@pytest.fixture
async def anonymous(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    transport = asgi_transport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


def test_the_public_routes_are_exactly_the_declared_list(app: Litestar) -> None:
    """The routes the application declares public are the list above (OPTIONS, which Litestar adds
    to every path, inherits its path's rule)."""
    declared = {key for key in public_routes(app) if key[0] != "OPTIONS"}
    assert declared == EXPECTED_PUBLIC, (
        f"public but not listed: {sorted(declared - EXPECTED_PUBLIC)}; "
        f"listed but not public: {sorted(EXPECTED_PUBLIC - declared)}"
    )


async def test_every_other_route_refuses_an_anonymous_caller(
    app: Litestar, anonymous: httpx.AsyncClient
) -> None:
    """Each registered route outside the public list, with each of its methods, answers an
    anonymous request with 401 (API) or the sign-in redirect (dashboard) — before its parameters
    or body are read, so no request body is sent. Dashboard forms get a valid CSRF token, so the
    answer is the authentication's, not the CSRF check's."""
    await anonymous.get("/health")  # the CSRF cookie
    csrf = anonymous.cookies["swl_csrf"]
    public = public_routes(app)
    checked = 0
    wrong: list[str] = []
    for path, handler in app_route_handlers(app):
        for method in sorted(handler.http_methods):
            if (method, path) in public:
                continue
            url = concrete(path)
            response = await anonymous.request(method, url, headers={"x-csrf-token": csrf})
            checked += 1
            if path.startswith("/api/"):
                ok = response.status_code == 401 and response.json()["code"] == "unauthorized"
            else:
                ok = response.status_code in (302, 303) and response.headers["location"].startswith(
                    "/login"
                )
            if not ok:
                wrong.append(f"{method} {url} -> {response.status_code}")
    assert not wrong, "answered without credentials:\n" + "\n".join(wrong)
    assert checked > 300  # every API operation and dashboard page, with their OPTIONS


async def test_a_route_whose_handler_never_asks_for_the_key_is_still_guarded(
    anonymous: httpx.AsyncClient,
) -> None:
    """``GET /api/v1/adrules/templates`` takes no ``principal``; it was public by accident."""
    response = await anonymous.get("/api/v1/adrules/templates")
    assert response.status_code == 401
    bogus = await anonymous.get(
        "/api/v1/adrules/templates", headers={"Authorization": "Bearer swl_not_a_key"}
    )
    assert bogus.status_code == 401


async def test_authentication_runs_before_validation(anonymous: httpx.AsyncClient) -> None:
    """An anonymous request with a malformed body or query hears 401, not what is wrong with its
    input (which would tell a stranger the shape of the API)."""
    body = await anonymous.post(
        "/api/v1/funnels/contacts",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert body.status_code == 401
    query = await anonymous.get("/api/v1/jobs?limit=not-a-number")
    assert query.status_code == 401


async def test_a_dashboard_fragment_tells_htmx_to_sign_in(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.get("/ui/partials/status", headers={"hx-request": "true"})
    assert response.status_code == 401
    assert response.headers["hx-redirect"] == "/login"


@get("/undeclared", sync_to_thread=False)
def _undeclared() -> str:
    return "open"


@get("/api/v1/open", sync_to_thread=False, opt=public("documentation"))
def _public_api() -> str:
    return "open"


@get("/both", sync_to_thread=False, opt={**public("x"), **authenticated(Auth.SESSION)})
def _both() -> str:
    return "open"


@get("/fine", sync_to_thread=False, opt=authenticated(Auth.API_KEY))
def _fine() -> str:
    return "guarded"


@pytest.mark.parametrize(
    ("handler", "guarded", "complaint"),
    [
        (_undeclared, True, "declares neither"),
        (_public_api, True, "never public"),
        (_both, True, "both public and authenticated"),
        (_fine, False, "guard does not cover it"),
    ],
)
def test_an_application_with_an_undeclared_route_is_refused(
    handler: object, guarded: bool, complaint: str
) -> None:
    app = Litestar(route_handlers=[handler], guards=[require_caller] if guarded else [])  # type: ignore[list-item]
    with pytest.raises(ImproperlyConfiguredException, match=complaint):
        verify_routes(app)


def test_a_public_route_states_why() -> None:
    with pytest.raises(ValueError):
        public("  ")
